//! The host's protocol: the conversation a host drives (`conversation`), the
//! commands it sends (`cmd`) and the replies it feeds back (`reply`), what each
//! conversation watches (`guard`), and the reading of job rows under the watch
//! (`rows`); the typed write plan and its commands (`write`).

pub mod cmd;
pub mod conversation;
pub mod guard;
pub mod reply;
pub mod rows;
pub mod write;
