//! Claims on dumps, so that several `knot watch` sharing one volume analyze each dump once and
//! tell a watcher that died on a dump from one that is still reading it (issue 35).
//!
//! A watcher that starts on dump `D` opens (creating it if need be) `D.knot.running` and takes
//! an exclusive open-file-description lock on it (`fcntl(F_OFD_SETLK)`, whole file), then writes
//! its pid, host and the dump's size and time into it. The kernel drops that lock when the file
//! is closed, which it does for a process that dies in any way (SIGKILL, the OOM killer), and the
//! lock is seen by every process on the node that opens the same file, whatever its container.
//! So:
//! - a marker whose lock is held: another watcher is reading `D`; skip it for now (not an error);
//! - a marker whose lock nobody holds, with this dump's size and time in it: its writer died
//!   while reading `D` (the only way the lock goes without the marker going first);
//! - a marker that is empty (or not whole): its writer died before it started reading `D`, so
//!   `D` did not kill it: take it over and analyze `D`.
//!
//! The races, and why each is safe:
//! - **Created but not yet locked.** Between `open(O_CREAT)` and the lock, the marker exists
//!   unlocked and empty. Another watcher that locks it first holds the claim (the creator's lock
//!   then fails and it skips the dump); since the marker is empty, it reads "never started", not
//!   "died". The content is written only under the lock, and read only under the lock, so it is
//!   never seen half-written by a live writer.
//! - **Report written, then marker removed.** The holder writes the report (or error file), then
//!   `D.knot.done`, then unlinks the marker, then closes it (releasing the lock): unlink before
//!   unlock. A watcher that was waiting to lock that file gets the lock on an unlinked inode; it
//!   checks that the path still names the inode it locked, finds it does not, and looks again. A
//!   watcher that creates a fresh marker after the unlink, or a holder killed between the done
//!   marker and the unlink, is caught by checking for `D`'s result under the lock, before
//!   anything else: a dump already done is left alone (and the leftover marker removed).
//! - **A marker left by an older knot without locks.** Its writer never locks, so it looks like a
//!   released claim: with this dump's size and time in it, it is taken as a watcher that died on
//!   the dump (as older knots themselves did). That is right for a marker left by a crash before
//!   an upgrade, and wrong only while an older watcher is still running on the same volume (it
//!   also replaces markers by rename, so it does not see claims either): during an upgrade, do
//!   not run old and new watchers over one volume at once.
//!
//! Where the lock cannot be taken (the file system refuses it: `ENOLCK`, `EOPNOTSUPP`, …) knot
//! says so once and goes on without claims, as before. Where the file system takes the lock but
//! keeps it on this node (NFS mounted with `local_lock`/`nolock`, SMB with `nobrl`, most FUSE file
//! systems), watchers on other nodes do not see it; [`locks_may_stay_local`] says what can be
//! told from the mount.

use serde_json::Value;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An environment variable for tests: once a watcher holds a claim and has written its marker,
/// it opens this path (a FIFO) and reads it to its end before reading the dump. A test that
/// opens the FIFO for writing returns from that `open` exactly when a watcher is mid-dump with
/// its claim held, and can kill it or let it go on (by closing the FIFO) without a sleep race.
pub(crate) const HOLD_ENV: &str = "KNOT_WATCH_TEST_HOLD";

/// This watcher's claim on one dump: the open, locked `.knot.running` marker. Dropping it
/// removes the marker, then releases the lock (in that order: see the module's races).
#[derive(Debug)]
pub(crate) struct Claim {
    file: fs::File,
    path: PathBuf,
}

/// What [`take`] found.
#[derive(Debug)]
pub(crate) enum Taken {
    /// This watcher holds the dump. `died`: the marker a watcher left that died while reading
    /// this very dump (its claim released without a result). `unlocked`: why no lock could be
    /// taken (the file system refused it), when none was.
    Held { claim: Claim, died: Option<Value>, unlocked: Option<io::Error> },
    /// Another live watcher holds it; its marker (pid, host), when it could be read.
    Busy { holder: Option<Value> },
    /// Another watcher finished it meanwhile.
    Done,
}

/// Takes the claim on the dump whose marker is `running`. `is_done` says whether the dump has
/// its result (checked under the lock); `same_dump` whether a marker's size and time are the
/// dump's current ones; `mine` is this watcher's marker, written once the claim is held.
pub(crate) fn take(running: &Path, is_done: &dyn Fn() -> bool, same_dump: &dyn Fn(&Value) -> bool, mine: &Value) -> io::Result<Taken> {
    // A few rounds: each lost one means another watcher finished or removed the marker between
    // our open and our lock, which can repeat only while watchers keep finishing this dump.
    for _ in 0..8 {
        let file = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(running)?;
        let unlocked = match lock(&file) {
            Ok(true) => None,
            Ok(false) => return Ok(Taken::Busy { holder: read_marker(running) }),
            Err(e) => Some(e),
        };
        let claim = Claim { file, path: running.to_path_buf() };
        // The lock is on an inode: it is a claim only if the marker's name still leads to it
        // (a finishing holder unlinks the marker before it unlocks).
        if !claim.names_its_inode() {
            claim.forget();
            continue;
        }
        if is_done() {
            // Done by another watcher between our scan and our lock, or its holder was killed
            // after writing the result and before removing the marker: drop removes it.
            return Ok(Taken::Done);
        }
        let mut text = String::new();
        let earlier = (&claim.file).read_to_string(&mut text).ok().and_then(|_| serde_json::from_str::<Value>(&text).ok());
        // Empty or not whole: its writer died before it read the dump. Another dump's size or
        // time: a marker of the dump this name held before. Neither killed anyone here.
        let died = earlier.filter(|v| same_dump(v));
        claim.write(mine)?;
        return Ok(Taken::Held { claim, died, unlocked });
    }
    Ok(Taken::Busy { holder: None })
}

impl Claim {
    fn names_its_inode(&self) -> bool {
        match (self.file.metadata(), fs::metadata(&self.path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    fn write(&self, v: &Value) -> io::Result<()> {
        let text = format!("{v}\n");
        self.file.set_len(0)?;
        self.file.write_all_at(text.as_bytes(), 0)?;
        // On a network file system, what another node reads after it gets the lock.
        self.file.sync_data()
    }

    /// Closes the marker without removing it (it is not ours: another watcher removed or
    /// replaced it after we opened it).
    fn forget(mut self) {
        self.path = PathBuf::new();
    }

    /// For tests: blocks on the FIFO named by [`HOLD_ENV`], if set, until its writer closes it.
    pub(crate) fn hold_for_test(&self) {
        if let Some(p) = std::env::var_os(HOLD_ENV) {
            let _ = fs::File::open(&p).and_then(|mut f| io::copy(&mut f, &mut io::sink()));
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Unlink, then unlock (when `file` closes after this): a watcher waiting on this inode
        // then finds it unlinked. Only while the name still leads to our inode: an older knot
        // (no locks) may have replaced it.
        if !self.path.as_os_str().is_empty() && self.names_its_inode() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// `Ok(true)`: locked; `Ok(false)`: another open file holds it; `Err`: the file system refused.
fn lock(file: &fs::File) -> io::Result<bool> {
    // SAFETY: a zeroed `flock` is valid (l_pid must be 0 for OFD locks); fcntl reads it only.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    loop {
        // SAFETY: a valid open descriptor and a valid `flock`; F_OFD_SETLK does not block.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// The marker at `path` (another watcher's pid and host), for the log; best effort, unlocked.
fn read_marker(path: &Path) -> Option<Value> {
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

/// Why a lock knot could not take is no claim, in words for the log.
pub(crate) fn refused(dir: &Path, e: &io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::ENOLCK) => " (NFSv3 without the lock manager: rpc.statd not running on this node, or the server's lockd unreachable)",
        Some(libc::EINVAL) => " (a kernel older than 3.15, without open-file-description locks)",
        _ => "",
    };
    format!(
        "cannot lock dump markers in {}: {e}{hint}; watchers cannot claim dumps here, so two of them over this volume may analyze a dump twice and take each other for dead: run one watcher per volume",
        dir.display()
    )
}

/// What can be told from the mount of `dir` about locks that do not leave this node (or this
/// mount): `Some(why)` for NFS mounted with `local_lock` (`nolock`), SMB mounted with `nobrl`,
/// and FUSE (whether a FUSE file system passes locks on is up to it, and knot cannot ask). What
/// cannot be told: a file system that accepts locks and keeps them local without saying so in
/// its mount options, and a node cut off from an NFS server past its lease (its locks lapse).
pub(crate) fn locks_may_stay_local(dir: &Path) -> Option<String> {
    let fs_type = statfs_type(dir)?;
    let (fstype, options) = mount_of(dir).unwrap_or_default();
    let (what, certain) = local_locks(fs_type, &fstype, &options)?;
    Some(format!(
        "{} is on {what}; watchers over this volume elsewhere {} each other's claims (a dump may be analyzed twice, or given a false \"knot died\" error): run one watcher per volume",
        dir.display(),
        if certain { "do not see" } else { "may not see" }
    ))
}

/// The file system of magic `fs_type` (named `fstype`, mounted with `options`), when its locks
/// stay on this node: what it is, and whether that is certain (FUSE: it may be).
fn local_locks(fs_type: i64, fstype: &str, options: &str) -> Option<(String, bool)> {
    let has = |opt: &str| options.split(',').any(|o| o == opt);
    match fs_type {
        NFS_SUPER_MAGIC => {
            let local = options.split(',').find_map(|o| o.strip_prefix("local_lock=")).filter(|v| matches!(*v, "all" | "posix"));
            match local {
                Some(v) => Some((format!("NFS mounted with local_lock={v} (nolock): its locks stay on this node"), true)),
                None if has("nolock") => Some(("NFS mounted with nolock: its locks stay on this node".to_string(), true)),
                None => None,
            }
        }
        CIFS_MAGIC_NUMBER | SMB2_MAGIC_NUMBER if has("nobrl") => Some(("SMB mounted with nobrl: its locks stay on this node".to_string(), true)),
        FUSE_SUPER_MAGIC => {
            let name = if fstype.is_empty() { "fuse" } else { fstype };
            Some((format!("a FUSE file system ({name}): whether its locks reach other nodes, or even other mounts of it on this node, is up to it"), false))
        }
        _ => None,
    }
}

const NFS_SUPER_MAGIC: i64 = 0x6969;
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;
const CIFS_MAGIC_NUMBER: i64 = 0xFF53_4D42;
const SMB2_MAGIC_NUMBER: i64 = 0xFE53_4D42;

fn statfs_type(dir: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed `statfs` is valid; `c` is a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // f_type is signed on some targets: the magic numbers are 32-bit.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_type as i64) & 0xFFFF_FFFF)
}

/// The file system type and super options of the mount holding `dir`, from
/// /proc/self/mountinfo, matched by device number.
fn mount_of(dir: &Path) -> Option<(String, String)> {
    let dev = fs::metadata(dir).ok()?.dev();
    let want = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo_entry(&text, &want)
}

fn mountinfo_entry(text: &str, dev: &str) -> Option<(String, String)> {
    text.lines().rev().find_map(|line| {
        let (head, tail) = line.split_once(" - ")?;
        if head.split(' ').nth(2)? != dev {
            return None;
        }
        let mut t = tail.split(' ');
        let fstype = t.next()?.to_string();
        let _source = t.next()?;
        Some((fstype, t.next().unwrap_or("").to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp_is(size: u64) -> impl Fn(&Value) -> bool {
        move |v: &Value| v["size"].as_u64() == Some(size)
    }

    #[test]
    fn a_held_claim_is_busy_to_another_open_of_the_marker_and_is_removed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let running = dir.path().join("core.1.knot.running");
        let mine = serde_json::json!({"size": 10, "pid": 1});
        let Taken::Held { claim, died, unlocked } = take(&running, &|| false, &stamp_is(10), &mine).unwrap() else { panic!("not held") };
        assert!(died.is_none() && unlocked.is_none());
        // OFD locks conflict between open file descriptions, also within one process.
        match take(&running, &|| false, &stamp_is(10), &mine).unwrap() {
            Taken::Busy { holder } => assert_eq!(holder.unwrap()["pid"], 1),
            other => panic!("a second claim was given: {other:?}"),
        }
        drop(claim);
        assert!(!running.exists(), "the marker outlived its claim");
        assert!(matches!(take(&running, &|| true, &stamp_is(10), &mine).unwrap(), Taken::Done));
        assert!(!running.exists(), "a done dump's marker was left");
    }

    #[test]
    fn an_unlocked_marker_of_this_dump_is_a_watcher_that_died_and_an_empty_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let running = dir.path().join("core.1.knot.running");
        let mine = serde_json::json!({"size": 10, "pid": 2});
        // What a killed watcher (or an older knot) leaves: its marker, no lock.
        fs::write(&running, r#"{"size": 10, "pid": 4242}"#).unwrap();
        let Taken::Held { claim, died, .. } = take(&running, &|| false, &stamp_is(10), &mine).unwrap() else { panic!("not held") };
        assert_eq!(died.unwrap()["pid"], 4242);
        assert_eq!(fs::read_to_string(&running).unwrap().trim(), mine.to_string(), "the claim's marker is this watcher's");
        drop(claim);
        // The marker of an earlier dump under this name, or one a watcher created and died before
        // writing: no one died on this dump.
        for text in [r#"{"size": 99, "pid": 4242}"#, "", "{\"size\": 1"] {
            fs::write(&running, text).unwrap();
            let Taken::Held { died, .. } = take(&running, &|| false, &stamp_is(10), &mine).unwrap() else { panic!("not held") };
            assert!(died.is_none(), "{text:?}");
        }
    }

    #[test]
    fn a_claim_on_a_marker_unlinked_by_its_finishing_holder_is_not_a_claim() {
        let dir = tempfile::tempdir().unwrap();
        let running = dir.path().join("core.1.knot.running");
        let mine = serde_json::json!({"size": 10});
        let Taken::Held { claim, .. } = take(&running, &|| false, &stamp_is(10), &mine).unwrap() else { panic!("not held") };
        // A waiter that opened the marker before the holder finished ...
        let waiter = fs::OpenOptions::new().read(true).write(true).open(&running).unwrap();
        assert!(!lock(&waiter).unwrap());
        drop(claim);
        // ... gets the lock on an inode the name no longer leads to.
        assert!(lock(&waiter).unwrap());
        let stale = Claim { file: waiter, path: running.clone() };
        assert!(!stale.names_its_inode());
        stale.forget();
    }

    #[test]
    fn mountinfo_is_matched_by_device() {
        let text = "22 1 0:21 / /proc rw - proc proc rw\n\
                    40 22 0:52 / /dumps rw,relatime - nfs srv:/export rw,vers=3,nolock,local_lock=all,addr=10.0.0.1\n";
        assert_eq!(mountinfo_entry(text, "0:52"), Some(("nfs".into(), "rw,vers=3,nolock,local_lock=all,addr=10.0.0.1".into())));
        assert_eq!(mountinfo_entry(text, "8:1"), None);
    }

    #[test]
    fn mounts_that_keep_locks_on_the_node_are_told_from_their_options() {
        let nfs3 = "rw,vers=3,rsize=1048576,proto=tcp,local_lock=none,addr=10.0.0.1";
        assert_eq!(local_locks(NFS_SUPER_MAGIC, "nfs", nfs3), None, "NFSv3 with the lock manager");
        assert_eq!(local_locks(NFS_SUPER_MAGIC, "nfs4", "rw,vers=4.1,local_lock=none"), None);
        let nolock = "rw,vers=3,nolock,proto=tcp,local_lock=all,addr=10.0.0.1";
        assert!(local_locks(NFS_SUPER_MAGIC, "nfs", nolock).is_some_and(|(w, certain)| certain && w.contains("local_lock=all")));
        assert!(local_locks(NFS_SUPER_MAGIC, "nfs", "rw,vers=4.2,local_lock=posix").is_some());
        // flock locks only stay local: knot's are fcntl (posix) ones.
        assert_eq!(local_locks(NFS_SUPER_MAGIC, "nfs", "rw,vers=3,local_lock=flock"), None);
        assert!(local_locks(SMB2_MAGIC_NUMBER, "cifs", "rw,vers=3.0,nobrl,cache=strict").is_some());
        assert_eq!(local_locks(SMB2_MAGIC_NUMBER, "cifs", "rw,vers=3.0,cache=strict"), None);
        assert!(local_locks(FUSE_SUPER_MAGIC, "fuse.s3fs", "rw,user_id=0").is_some_and(|(w, certain)| !certain && w.contains("fuse.s3fs")));
        assert_eq!(local_locks(0xEF53, "ext4", "rw"), None);
    }

    #[test]
    fn a_local_directory_keeps_no_locks_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        // /tmp here is a local file system (or tmpfs): nothing to say.
        if let Some(t) = statfs_type(dir.path()) {
            assert!(![NFS_SUPER_MAGIC, FUSE_SUPER_MAGIC].contains(&t), "the test's temporary directory is on NFS or FUSE");
        }
        assert_eq!(locks_may_stay_local(dir.path()), None);
    }
}
