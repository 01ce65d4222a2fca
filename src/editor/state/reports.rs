//! What slow work tells the state task when it is done. A timer, a disk read or write, the
//! editor's answer to an edit: each runs in a task of its own (the state task does no I/O and
//! never waits) and comes back as one named [`Report`]; [`State::take_report`] is the one place
//! that says what each does.

use std::path::PathBuf;

use super::State;
use crate::editor::chat::inbox::ChatInbox;
use crate::editor::disk::files::FileError;
use crate::editor::documents::effects::EffectError;
use crate::editor::review::ReviewId;

/// One piece of slow work, done.
#[derive(Debug)]
pub enum Report {
    /// The flush timer numbered `timer` of the chat at `path` ended.
    ChatTimerEnded { path: PathBuf, timer: u64 },
    /// `text` was appended to the chat file at `path`, which is not open (or that failed).
    ChatFileAppended {
        path: PathBuf,
        text: String,
        result: Result<(), String>,
    },
    /// The editor answered the edit appending `text` to the open chat at `path`, sent when the
    /// document was at `sent_version`.
    ChatEditApplied {
        path: PathBuf,
        text: String,
        sent_version: i32,
        result: Result<(), EffectError>,
    },
    /// agentls's record of the reopened chat at `path` was read (`None`: it has none).
    ChatRecordRead {
        path: PathBuf,
        record: Option<Vec<u8>>,
    },
    /// ... and compared with its document: what it lacks, and whether its last turn ended.
    ChatRecordCompared {
        path: PathBuf,
        restore: crate::editor::chat::record::Restore,
    },
    /// Items wait in the chats' inbox.
    ChatItemsWaiting(ChatInbox),
    /// Removing the sent comment prompt `comment` from `path` was refused; it is tried once more.
    CommentRemovalRefused { path: PathBuf, comment: String },
    /// `path` is due to be looked through for comment prompts.
    CommentScanDue(PathBuf),
    /// The system refused to watch folders of the workspace.
    WatchesRefused(crate::editor::disk::watch::WatchesRefused),
    /// The workspace watcher saw these files change on disk.
    FilesChangedOnDisk(Vec<PathBuf>),
    /// The reviews of the files the user typed in are due to be shown again.
    PresentationDue,
    /// The proposer of review `id` (`who`, for `file`) went away before the verdict.
    ProposerGone {
        id: ReviewId,
        announce: bool,
        who: String,
        file: String,
    },
    /// The editor answered the edit applying hunks `indices` of review `id`.
    ReviewEditApplied {
        id: ReviewId,
        indices: Vec<usize>,
        result: Result<(), EffectError>,
    },
    /// The grace for the editor to save the file of accepted review `id` ran out.
    SyncGraceEnded(ReviewId),
    /// What the disk says of the file of review `id`, which is not open (`None`: unreadable).
    ClosedFileRead { id: ReviewId, disk: Option<String> },
    /// Review `id` was rejected after `agent` wrote its proposal to `file`: what putting the
    /// file back came to (`None`: nothing had to be put back).
    RejectionRestored {
        id: ReviewId,
        agent: String,
        file: String,
        told: Option<Result<String, String>>,
    },
    /// The accepted `text` of review `id` was written to its closed file (or that failed).
    AcceptedWritten {
        id: ReviewId,
        text: String,
        rejected: Vec<String>,
        written: Result<(), FileError>,
    },
    /// The file of settling review `id` was read as it was before: its verdict can go.
    SettlingVerdictDue(ReviewId),
    /// agentls is about to write `text` (hashed to `digest`) to `path` itself.
    OwnWrite {
        path: PathBuf,
        text: String,
        digest: u64,
    },
    /// Files changed on disk, not through a review: what each says now.
    DiskChangedUnasked(Vec<crate::editor::disk::changes::DiskChange>),
    /// The editor did not take `who`'s unasked change of `path` into the buffer, which was
    /// saved as `saved_before`.
    LandingRefused {
        path: PathBuf,
        saved_before: String,
        who: String,
    },
}

impl From<crate::editor::disk::watch::DiskNews> for Report {
    fn from(news: crate::editor::disk::watch::DiskNews) -> Self {
        use crate::editor::disk::watch::DiskNews;
        match news {
            DiskNews::WatchesRefused(refused) => Self::WatchesRefused(refused),
            DiskNews::FilesChanged(paths) => Self::FilesChangedOnDisk(paths),
        }
    }
}

impl Report {
    /// The report's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ChatTimerEnded { .. } => "chat timer ended",
            Self::ChatFileAppended { .. } => "chat file appended",
            Self::ChatEditApplied { .. } => "chat edit applied",
            Self::ChatRecordRead { .. } => "chat record read",
            Self::ChatRecordCompared { .. } => "chat record compared",
            Self::ChatItemsWaiting(_) => "chat items waiting",
            Self::CommentRemovalRefused { .. } => "comment removal refused",
            Self::CommentScanDue(_) => "comment scan due",
            Self::WatchesRefused(_) => "watches refused",
            Self::FilesChangedOnDisk(_) => "files changed on disk",
            Self::PresentationDue => "presentation due",
            Self::ProposerGone { .. } => "proposer gone",
            Self::ReviewEditApplied { .. } => "review edit applied",
            Self::SyncGraceEnded(_) => "sync grace ended",
            Self::ClosedFileRead { .. } => "closed file read",
            Self::RejectionRestored { .. } => "rejection restored",
            Self::AcceptedWritten { .. } => "accepted written",
            Self::SettlingVerdictDue(_) => "settling verdict due",
            Self::OwnWrite { .. } => "own write",
            Self::DiskChangedUnasked(_) => "disk changed unasked",
            Self::LandingRefused { .. } => "landing refused",
        }
    }
}

impl State {
    /// Does what `report` says.
    pub fn take_report(&mut self, report: Report) {
        match report {
            Report::ChatTimerEnded { path, timer } => self.chat_timer_ended(&path, timer),
            Report::ChatFileAppended { path, text, result } => {
                self.chat_file_appended(&path, text, result)
            }
            Report::ChatEditApplied {
                path,
                text,
                sent_version,
                result,
            } => self.chat_edit_applied(&path, text, sent_version, result),
            Report::ChatRecordRead { path, record } => self.compare_chat_record(path, record),
            Report::ChatRecordCompared { path, restore } => {
                self.chat_record_compared(&path, restore);
            }
            Report::ChatItemsWaiting(inbox) => {
                for (path, item) in inbox.take() {
                    self.chat_item(&path, item);
                }
            }
            Report::CommentRemovalRefused { path, comment } => {
                self.remove_comment(&path, &comment, false)
            }
            Report::CommentScanDue(path) => self.scan_comment_prompts(&path),
            Report::WatchesRefused(refused) => self.watches_refused(&refused),
            Report::FilesChangedOnDisk(paths) => self.files_changed_on_disk(paths),
            Report::PresentationDue => {
                for path in std::mem::take(&mut self.present_due) {
                    self.present(&path);
                }
                self.announce_withdrawals();
            }
            Report::ProposerGone {
                id,
                announce,
                who,
                file,
            } => self.proposer_gone(id, announce, &who, &file),
            Report::ReviewEditApplied {
                id,
                indices,
                result,
            } => self.edit_applied(id, &indices, result),
            Report::SyncGraceEnded(id) => self.finish_without_sync(id),
            Report::ClosedFileRead { id, disk } => self.finish_closed(id, disk),
            Report::RejectionRestored {
                id,
                agent,
                file,
                told,
            } => self.rejection_restored(id, &agent, &file, told),
            Report::AcceptedWritten {
                id,
                text,
                rejected,
                written,
            } => self.accepted_written(id, text, rejected, written),
            Report::SettlingVerdictDue(id) => self.send_settling_verdict(id),
            Report::OwnWrite { path, text, digest } => self.own_write(path, &text, digest),
            Report::DiskChangedUnasked(changes) => self.disk_changed_unasked(changes),
            Report::LandingRefused {
                path,
                saved_before,
                who,
            } => self.landing_refused(&path, &saved_before, &who),
        }
    }
}
