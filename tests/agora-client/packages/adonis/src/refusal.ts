/** Stored when someone declines without giving a reason. Browser-safe and independent of the agent loop. */
export const DEFAULT_REFUSAL_REASON = 'rejected by user';
