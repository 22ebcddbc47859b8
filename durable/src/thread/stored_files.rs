//! The thread's files: reserving what a send or an upload brings (before
//! its bytes are stored), attaching them to the message that carries them,
//! reading one, and removing uploads no message came to refer to.
//!
//! A file's bytes are stored by the Worker between two requests to the
//! thread: one that checks the send (or upload) and reserves its files,
//! and, once the bytes are in the bucket, the send itself. Every refusal
//! that can be known before the bytes are stored is made by the first, so
//! a refused send leaves the bucket as it was. What is refused only by the
//! second (the thread became busy in between) leaves reserved files that
//! no message refers to: the thread's alarm removes those after the grace
//! period (`FILE_GRACE_MS`), as it does an upload never sent.
//!
//! Invariants enforced here:
//! - A file no message refers to is removed only after its grace period,
//!   counted from its last reservation: sending the same bytes again
//!   renews it. A file a message refers to is kept as long as the thread.
//! - A file being removed is never reserved again until its removal is
//!   done (409 `file_busy`): its row says `deleting` from the moment the
//!   removal is decided until the shell reports it done, so a removal can
//!   never take bytes a new send has just stored.

use super::error::Error;
use super::{Sink, Thread};
use crate::agent::models::Catalog;
use crate::effect::Effect;
use crate::files::spec::{AttachmentSpec, Source};
use crate::files::{self, media, Attachment, FileRef, NewFile};
use crate::storage::store::{FileRow, FileState, Store};
use serde_json::{json, Value};
use std::ops::{Deref, DerefMut};

/// Most files one alarm removes (the rest wait for the next).
const SWEEP_BATCH: usize = 100;
/// A removal not reported done within this long is asked for again (the
/// instance that was doing it may have been evicted).
const RETRY_REMOVAL_MS: i64 = 60_000;

/// The thread's files: a borrow of its store (shared to read, exclusive to
/// change) and its id, so a file's rows are changed here and nowhere else
/// ([`Thread::files`]).
pub struct Files<'t, St> {
    store: St,
    thread_id: &'t str,
}

impl<'t, S: Store, St: Deref<Target = S>> Files<'t, St> {
    pub(super) fn new(store: St, thread_id: &'t str) -> Self {
        Files { store, thread_id }
    }

    /// A send's attachments as its message will hold them: each stored file
    /// this thread holds (404 `file_not_found` for any other), each inline
    /// file the Worker read (`inline`, by marker index; reserved already
    /// unless `reserving`), each URL as it is.
    pub fn attachments_of(
        &self,
        specs: &[AttachmentSpec],
        inline: &[Option<NewFile>],
        reserving: bool,
    ) -> Result<Vec<Attachment>, Error> {
        specs
            .iter()
            .map(|spec| {
                let named = |f: FileRef| FileRef { name: spec.name.clone().or(f.name), ..f };
                Ok(match &spec.source {
                    Source::Stored(id) => Attachment::File(named(self.held_file(id)?.file)),
                    Source::Inline(n) => {
                        let new = inline
                            .get(*n)
                            .and_then(Option::as_ref)
                            .ok_or_else(|| Error::InvalidFile(format!("no file was sent inline as #{n}")))?;
                        if reserving {
                            Attachment::File(new.reference())
                        } else {
                            Attachment::File(named(self.held_file(&new.file_id)?.file))
                        }
                    }
                    Source::Url(url) => Attachment::Url {
                        url: url.clone(),
                        media_type: spec
                            .media_type
                            .clone()
                            .ok_or_else(|| Error::InvalidFile("an attachment by URL needs its `mediaType`".into()))?,
                        name: spec.name.clone(),
                    },
                    // Bytes the Worker found left in the JSON: the file it
                    // decoded from them, known by their hash.
                    Source::Data(d) => {
                        let (bytes, _) = files::spec::decode_data(d, usize::MAX).map_err(Error::Input)?;
                        let id = files::file_id(&hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)));
                        let new = inline.iter().flatten().find(|f| f.file_id == id).ok_or_else(|| {
                            Error::InvalidFile(
                                "bytes inline in an attachment are read by the Worker's send routes only".into(),
                            )
                        })?;
                        if reserving {
                            Attachment::File(new.reference())
                        } else {
                            Attachment::File(named(self.held_file(&new.file_id)?.file))
                        }
                    }
                })
            })
            .collect()
    }

    /// A file this thread holds and is not removing.
    fn held_file(&self, file_id: &str) -> Result<FileRow, Error> {
        match self.store.file(file_id)? {
            Some(row) if row.state == FileState::Deleting => Err(Error::FileBusy),
            Some(row) => Ok(row),
            None => Err(Error::FileNotFound),
        }
    }

    /// A file to read: its reference and its object's key (404
    /// `file_not_found` for one this thread does not hold).
    pub fn read_file(&self, file_id: &str) -> Result<(FileRef, String), Error> {
        if !files::is_file_id(file_id) {
            return Err(Error::FileNotFound);
        }
        let row = match self.store.file(file_id)? {
            Some(row) if row.state != FileState::Deleting => row,
            _ => return Err(Error::FileNotFound),
        };
        let generation = super::meta::stored_generation(&*self.store)?.ok_or(Error::FileNotFound)?;
        let key = files::key(self.thread_id, generation, &row.file.sha256);
        Ok((row.file, key))
    }

    /// When the next file is due for removal.
    pub fn next_sweep(&self, grace_ms: i64) -> Option<i64> {
        let oldest = |state| self.store.oldest_file(state).ok().flatten();
        let reserved = oldest(FileState::Reserved).map(|r| r.reserved_at + grace_ms);
        let deleting = oldest(FileState::Deleting).map(|r| r.reserved_at + RETRY_REMOVAL_MS);
        reserved.into_iter().chain(deleting).min()
    }
}

impl<'t, S: Store, St: DerefMut<Target = S>> Files<'t, St> {
    /// Reserves files whose bytes the Worker is about to store: `{reserved:
    /// [{fileId, key, put}], files: [{fileId, url, mediaType, size, name}]}`,
    /// `put: false` for bytes the thread already keeps for a message.
    pub fn reserve_files(&mut self, new: &[NewFile], origin: &str, random: u64, now: i64) -> Result<Value, Error> {
        let generation = super::meta::generation(&mut *self.store, || random)?;
        let mut reserved = Vec::new();
        let mut described = Vec::new();
        for f in new {
            // The same bytes sent again under another name: a later send
            // by `fileId` names it as it was last uploaded.
            let renamed =
                |row: &FileRow| FileRef { name: f.name.clone().or(row.file.name.clone()), ..row.file.clone() };
            let put = match self.store.file(&f.file_id)? {
                Some(row) if row.state == FileState::Deleting => return Err(Error::FileBusy),
                Some(row) if row.state == FileState::Attached => {
                    self.store.put_file(&FileRow { file: renamed(&row), ..row })?;
                    false
                }
                Some(row) => {
                    let row = FileRow { file: renamed(&row), reserved_at: now, ..row };
                    self.store.put_file(&row)?;
                    true
                }
                None => {
                    let row = FileRow { file: f.reference(), state: FileState::Reserved, reserved_at: now };
                    self.store.put_file(&row)?;
                    true
                }
            };
            let key = files::key(self.thread_id, generation, &f.sha256);
            reserved.push(json!({ "fileId": f.file_id, "key": key, "put": put }));
            described.push(Attachment::File(f.reference()).to_json(origin, self.thread_id));
        }
        Ok(json!({ "reserved": reserved, "files": described }))
    }

    /// A file a tool of the built-in agent returned (an MCP server's image):
    /// reserved and attached at once, since the run's record refers to it.
    /// Returns the key its bytes go to.
    pub fn store_agent_file(&mut self, new: &NewFile, random: u64, now: i64) -> Result<String, Error> {
        let reserved = self.reserve_files(std::slice::from_ref(new), "", random, now)?;
        self.attach_files(&[Attachment::File(new.reference())])?;
        reserved["reserved"][0]["key"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::Unavailable("no key was reserved".into()))
    }

    /// The message that carries `attachments` was accepted: their files are
    /// kept as long as the thread.
    pub fn attach_files(&mut self, attachments: &[Attachment]) -> Result<(), Error> {
        for a in attachments {
            let Attachment::File(f) = a else { continue };
            if let Some(row) = self.store.file(&f.file_id)? {
                if row.state == FileState::Reserved {
                    self.store.put_file(&FileRow { state: FileState::Attached, ..row })?;
                }
            }
        }
        Ok(())
    }

    /// Files reserved longer ago than `grace_ms` that no message refers
    /// to, and removals a lost instance left undone: marked `deleting`, and
    /// the shell asked to remove their bytes ([`Effect::DeleteFiles`]).
    pub fn sweep_files(&mut self, grace_ms: i64, now: i64) -> Result<Option<Effect>, Error> {
        let store = |e| Error::Storage(e);
        // Removals decided long enough ago and not reported done are asked
        // for again (removing absent bytes is harmless).
        let mut rows =
            self.store.files_in(FileState::Deleting, Some(now - RETRY_REMOVAL_MS + 1), SWEEP_BATCH).map_err(store)?;
        rows.extend(self.store.files_in(FileState::Reserved, Some(now - grace_ms + 1), SWEEP_BATCH).map_err(store)?);
        for row in &rows {
            // `reserved_at` of a row being removed: when its removal was asked.
            self.store
                .put_file(&FileRow { state: FileState::Deleting, reserved_at: now, ..row.clone() })
                .map_err(store)?;
        }
        if rows.is_empty() {
            return Ok(None);
        }
        let generation = super::meta::stored_generation(&*self.store)?.unwrap_or(0);
        let keys = rows.iter().map(|r| files::key(self.thread_id, generation, &r.file.sha256)).collect();
        let ids = rows.into_iter().map(|r| r.file.file_id).collect();
        Ok(Some(Effect::DeleteFiles { keys, ids }))
    }

    /// The shell removed these files' bytes: their rows go (unless the
    /// thread holds them again meanwhile, which `file_busy` prevents).
    pub fn files_deleted(&mut self, ids: &[String]) -> Result<(), Error> {
        for id in ids {
            if self.store.file(id)?.is_some_and(|r| r.state == FileState::Deleting) {
                self.store.delete_file(id)?;
            }
        }
        Ok(())
    }
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// An upload (`POST /v1/threads/:id/files`): its files reserved, as a
    /// send's are; the first write to a thread nobody owns claims it.
    pub fn upload(&mut self, who: super::Sender, now: i64) -> Result<Value, Error> {
        let new: Vec<NewFile> = who.files.iter().flatten().cloned().collect();
        if new.is_empty() {
            return Err(Error::InvalidFile("the upload holds no file".into()));
        }
        let reserved = self.journal.files_mut().reserve_files(&new, who.origin, who.random, now)?;
        self.claim(who)?;
        Ok(reserved)
    }
}

/// Checks that `model` takes every attachment (its catalog `input`):
/// 400 `unsupported_attachment` naming the model and the type.
pub(super) fn check_model_input(
    catalog: &Catalog,
    model: Option<&str>,
    attachments: &[Attachment],
) -> Result<(), Error> {
    let Some(id) = model else { return Ok(()) };
    let Some(entry) = catalog.models.get(id) else { return Ok(()) };
    for a in attachments {
        let input = media::input(a.media_type());
        if !entry.takes(input) {
            return Err(Error::UnsupportedAttachment {
                model: id.to_owned(),
                media_type: a.media_type().to_owned(),
                input: input.as_str().to_owned(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::MemoryStore;

    /// An unsent upload lives out its grace period, then is marked for
    /// removal; while its removal is under way the same bytes are refused
    /// (`file_busy`), and once the shell reports it done they may come again.
    /// A file a message holds is never removed.
    #[test]
    fn an_unsent_file_is_removed_after_its_grace_and_never_while_held() {
        let mut store = MemoryStore::default();
        let (unsent, held) = (NewFile::of(b"unsent", "text/plain", None), NewFile::of(b"held", "text/plain", None));
        let mut files = Files::new(&mut store, "t1");
        files.reserve_files(&[unsent.clone(), held.clone()], "https://x.test", 6, 1_000).unwrap();
        files.attach_files(&[Attachment::File(held.reference())]).unwrap();
        assert_eq!(files.next_sweep(500), Some(1_500));
        assert!(files.sweep_files(500, 1_499).unwrap().is_none(), "not before its grace ends");
        let Some(Effect::DeleteFiles { keys, ids }) = files.sweep_files(500, 1_500).unwrap() else { panic!() };
        assert_eq!(ids, std::slice::from_ref(&unsent.file_id));
        assert_eq!(keys, [crate::files::key("t1", 7, &unsent.sha256)]);
        assert!(matches!(files.reserve_files(std::slice::from_ref(&unsent), "", 6, 1_600), Err(Error::FileBusy)));
        assert!(matches!(files.read_file(&unsent.file_id), Err(Error::FileNotFound)));
        assert_eq!(files.read_file(&held.file_id).unwrap().0, held.reference());
        files.files_deleted(&ids).unwrap();
        files.reserve_files(std::slice::from_ref(&unsent), "", 6, 1_700).unwrap();
        assert!(files.read_file(&unsent.file_id).is_ok(), "sent again once removed");
    }

    #[test]
    fn another_thread_s_file_or_a_malformed_id_is_not_found() {
        let store = MemoryStore::default();
        let files = Files::new(&store, "t1");
        assert!(matches!(files.read_file("f_0123"), Err(Error::FileNotFound)));
        assert!(matches!(files.read_file("../etc/passwd"), Err(Error::FileNotFound)));
    }
}
