//! threadline's own file routes: uploading files to a thread
//! (`POST /v1/threads/:threadId/files`, raw bytes or `multipart/form-data`)
//! and reading one back (`GET /v1/threads/:threadId/files/:fileId`), which
//! every protocol's history links its attachments to. The bytes are the
//! bucket's; the Worker stores and streams them as the thread decides
//! ([`files`](crate::files)).

use super::{BodyKind, Gate, Target};
use crate::access::Access;
use crate::effect::Effect;
use crate::wire::error::ApiError;
use crate::files;
use crate::wire::route::Spec;
use crate::settings::Settings;
use crate::storage::store::Store;
use crate::thread::{Answer, Call, Sender, Sink, Thread};
use serde::{Deserialize, Serialize};

/// A file route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `POST /v1/threads/:threadId/files`: the same callers as a send.
    Upload { thread: String },
    /// `GET /v1/threads/:threadId/files/:fileId`: the thread's readers.
    Read { thread: String, file: String },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec {
            path: "/v1/threads/:threadId/files",
            methods: &["POST"],
            build: |p, _| Ok(R::Upload { thread: p.thread("threadId")? }),
        },
        Spec {
            path: "/v1/threads/:threadId/files/:fileId",
            methods: &["GET"],
            build: |p, _| Ok(R::Read { thread: p.thread("threadId")?, file: p.raw("fileId").to_owned() }),
        },
    ];

    fn target(&self) -> Target {
        Target::Thread
    }

    fn thread(&self) -> &str {
        match self {
            R::Upload { thread } | R::Read { thread, .. } => thread,
        }
    }

    fn access(&self) -> Access {
        match self {
            R::Upload { .. } => Access::Send,
            R::Read { .. } => Access::Reader,
        }
    }

    fn not_found(&self) -> ApiError {
        match self {
            R::Upload { .. } => ApiError::thread_not_found(),
            // A file of a thread the caller may not read is no file.
            R::Read { .. } => ApiError::file_not_found(),
        }
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Upload { .. } => BodyKind::Upload,
            R::Read { .. } => BodyKind::None,
        }
    }

    fn serves_file(&self) -> bool {
        matches!(self, R::Read { .. })
    }

    fn serve<S: Store, K: Sink>(
        &self,
        t: &mut Thread<S, K>,
        call: &Call,
        gate: &Gate,
        _settings: &Settings,
        now: i64,
        _: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let grant = gate.admitted()?;
        match self {
            R::Upload { .. } => {
                // The Worker read and checked the files; the thread reserves
                // them, the Worker stores them, and answers 201.
                if !call.reserve {
                    return Err(ApiError::invalid_file("an upload's files are read by the Worker"));
                }
                let who = Sender::of(grant, call);
                Ok(t.upload(who, now).map(|v| Answer::json(200, &v))?)
            }
            R::Read { file, .. } => read(t, file, call),
        }
    }
}

/// A stored file's answer, as [`files::serve`] decides it: the plan the
/// Worker streams the bytes by, or a reply without them.
pub fn read<S: Store, K: Sink>(t: &Thread<S, K>, file_id: &str, call: &Call) -> Result<Answer, ApiError> {
    let (file, key) = t.journal().files().read_file(file_id)?;
    let range = (call.header)("range");
    let etag = (call.header)("if-none-match");
    Ok(match files::serve::answer(&file, &key, range.as_deref(), etag.as_deref()) {
        files::serve::FileAnswer::Bytes(plan) => Answer::json(200, &serde_json::to_value(plan).unwrap_or_default()),
        files::serve::FileAnswer::Reply(r) => Answer::Reply(r),
    })
}
