//! Real programs from Debian for `cargo xtask bench`: redis, memcached and mariadb, installed
//! with apt-get when missing (as root), started on a private port and data directory, given
//! some work (keys stored, a table filled) so their threads and heaps are a service's, then
//! dumped by gdb's `gcore` while running and by the kernel (a fatal signal with
//! RLIMIT_CORE unlimited; this machine's core_pattern must write `core` into the process's
//! directory). The cores are kept under `target/bench/programs/NAME/KIND/` and reused
//! (`--remake` makes them again). Every core made is checked (an ELF core whose segments are
//! all in the file, within `MAX_CORE_BYTES`): gdb's gcore of mariadbd once wrote an 8 TiB
//! file that was not ELF (its buffer pool's reserved address space, see `start`). The writers are held to that size by RLIMIT_FSIZE (gcore) and
//! RLIMIT_CORE (the kernel), and nothing is made when the disk has not room for it.

use anyhow::{Context, Result, bail};
use knot_samples::DumpKind;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The most one core may take; a bigger one is cut short by the limit and then rejected.
const MAX_CORE_BYTES: u64 = 4 << 30;
/// Room kept free on the disk beside a core being made.
const DISK_MARGIN_BYTES: u64 = 8 << 30;
/// Times gcore is run on a process before its dump is given up.
const GCORE_TRIES: usize = 2;

/// A dump of a real program.
pub(crate) struct ProgramDump {
    pub(crate) name: &'static str,
    pub(crate) core: PathBuf,
    /// The program's executable (what `/proc/PID/exe` named).
    pub(crate) binary: PathBuf,
}

#[derive(Clone, Copy)]
pub(crate) struct Program {
    pub(crate) name: &'static str,
    /// The Debian package that brings it.
    package: &'static str,
    server: &'static str,
    /// The signal that makes the kernel dump it: one it does not catch, or (mariadbd, which
    /// catches them all) one it re-raises for a core with `--core-file`.
    kernel_signal: i32,
    port: u16,
}

pub(crate) const PROGRAMS: [Program; 3] = [
    Program { name: "redis", package: "redis-server", server: "redis-server", kernel_signal: libc::SIGQUIT, port: 16379 },
    Program { name: "memcached", package: "memcached", server: "memcached", kernel_signal: libc::SIGQUIT, port: 16211 },
    Program { name: "mariadb", package: "mariadb-server", server: "mariadbd", kernel_signal: libc::SIGABRT, port: 16306 },
];

/// Installs what is missing of the programs and of eu-stack (Debian's elfutils) with apt-get,
/// when running as root; otherwise says what is missing.
pub(crate) fn install_missing() {
    let mut missing: Vec<&str> = PROGRAMS.iter().filter(|p| server_path(p).is_none()).map(|p| p.package).collect();
    if crate::bench::find_tool("eu-stack").is_none() {
        missing.push("elfutils");
    }
    if missing.is_empty() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("note: not root, so not installing {} (apt-get install {})", missing.join(", "), missing.join(" "));
        return;
    }
    eprintln!("install apt-get install -y {}", missing.join(" "));
    let status = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("note: apt-get install {} failed; the dumps it would have made are skipped", missing.join(" "));
    }
}

fn server_path(p: &Program) -> Option<PathBuf> {
    crate::bench::find_tool(p.server).or_else(|| {
        let s = PathBuf::from("/usr/sbin").join(p.server);
        s.is_file().then_some(s)
    })
}

/// The program's dump of `kind`, made unless one is there (or `remake`).
pub(crate) fn ensure(p: &Program, kind: DumpKind, root: &Path, remake: bool) -> Result<ProgramDump> {
    let dir = root.join(p.name).join(kind.as_str());
    let core = dir.join("core");
    let exe_note = dir.join("exe");
    if !remake && core.is_file() && exe_note.is_file() && check_core(&core).is_ok() {
        let binary = PathBuf::from(fs::read_to_string(&exe_note)?.trim());
        return Ok(ProgramDump { name: p.name, core, binary });
    }
    let server = server_path(p).with_context(|| format!("{} is not installed (apt-get install {})", p.server, p.package))?;
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let free = free_bytes(&dir)?;
    if free < MAX_CORE_BYTES + DISK_MARGIN_BYTES {
        bail!("{} MiB free on the disk of {}: not making a core that may take {} MiB", free >> 20, dir.display(), MAX_CORE_BYTES >> 20);
    }
    let data = dir.join("data");
    fs::create_dir_all(&data)?;
    let mut child = Running(Some(start(p, &server, &dir, &data)?));
    let pid = child.pid();
    wait_ready(p, &data, pid)?;
    load(p, &data).with_context(|| format!("loading {}", p.name))?;
    // Let the load settle: worker threads back to waiting.
    std::thread::sleep(Duration::from_millis(500));
    let binary = fs::read_link(format!("/proc/{pid}/exe")).with_context(|| format!("reading /proc/{pid}/exe"))?;
    match kind {
        DumpKind::Gcore => {
            let mut why = String::new();
            for attempt in 1..=GCORE_TRIES {
                match gcore(&dir, pid) {
                    Ok(made) => {
                        fs::rename(&made, &core)?;
                        why.clear();
                        break;
                    }
                    Err(e) => {
                        why = format!("{e:#}");
                        eprintln!("note: gcore of {} (try {attempt} of {GCORE_TRIES}): {why}", p.name);
                    }
                }
            }
            if !why.is_empty() {
                bail!("gcore of {} made no usable core: {why}", p.name);
            }
        }
        DumpKind::Kernel => {
            // SAFETY: kill has no memory preconditions; pid is our child.
            if unsafe { libc::kill(pid as i32, p.kernel_signal) } != 0 {
                bail!("kill {pid}: {}", std::io::Error::last_os_error());
            }
            let status = child.wait_timeout(Duration::from_secs(60))?;
            // core_pattern "core", with or without core_uses_pid.
            // In the directory it runs in: redis moves into its --dir.
            let made = [&dir, &data]
                .into_iter()
                .flat_map(|d| [d.join("core"), d.join(format!("core.{pid}"))])
                .find(|c| c.is_file());
            let Some(made) = made else {
                let pattern = fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
                bail!("the kernel wrote no core for {} ({status:?}; core_pattern {:?})", p.name, pattern.trim());
            };
            if made != core {
                fs::rename(&made, &core)?;
            }
            if let Err(e) = check_core(&core) {
                let _ = fs::remove_file(&core);
                bail!("the kernel's core of {} is not usable: {e:#}", p.name);
            }
        }
    }
    drop(child);
    let _ = fs::remove_dir_all(&data);
    fs::write(&exe_note, binary.display().to_string())?;
    Ok(ProgramDump { name: p.name, core, binary })
}

/// Runs gcore on `pid` into `dir`, its output held to `MAX_CORE_BYTES`; the checked core's path.
/// A core that fails the check is deleted.
fn gcore(dir: &Path, pid: u32) -> Result<PathBuf> {
    let made = dir.join(format!("gcore.{pid}"));
    let mut cmd = Command::new("gcore");
    cmd.arg("-o").arg(dir.join("gcore")).arg(pid.to_string());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let fsize = libc::rlimit { rlim_cur: MAX_CORE_BYTES, rlim_max: MAX_CORE_BYTES };
            libc::setrlimit(libc::RLIMIT_FSIZE, &fsize);
            // gdb killed by SIGXFSZ must not dump itself.
            let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
    let out = cmd.output().context("running gcore")?;
    let checked = if out.status.success() && made.is_file() {
        check_core(&made)
    } else {
        Err(anyhow::anyhow!("gcore {pid} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()))
    };
    if checked.is_err() {
        let _ = fs::remove_file(&made);
    }
    checked.map(|()| made)
}

/// Whether `path` is a usable core: an x86-64 ELF core within `MAX_CORE_BYTES` whose program
/// headers and loaded segments lie inside the file.
fn check_core(path: &Path) -> Result<()> {
    let size = fs::metadata(path)?.len();
    if size > MAX_CORE_BYTES {
        bail!("{} is {} MiB, more than the {} MiB allowed", path.display(), size >> 20, MAX_CORE_BYTES >> 20);
    }
    let mut f = fs::File::open(path)?;
    let mut ehdr = [0u8; 64];
    f.read_exact(&mut ehdr).with_context(|| format!("{} is shorter than an ELF header", path.display()))?;
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u64_at = |b: &[u8], o: usize| b[o..o + 8].iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x));
    if &ehdr[..4] != b"\x7fELF" || ehdr[4] != 2 || ehdr[5] != 1 {
        bail!("{} is not a 64-bit little-endian ELF file", path.display());
    }
    if u16_at(&ehdr, 16) != 4 {
        bail!("{} is ELF but not a core (e_type {})", path.display(), u16_at(&ehdr, 16));
    }
    let (phoff, phentsize, phnum) = (u64_at(&ehdr, 32), u64::from(u16_at(&ehdr, 54)), u64::from(u16_at(&ehdr, 56)));
    if phentsize < 56 || phnum == 0 || phoff.saturating_add(phentsize * phnum) > size {
        bail!("{}: its program headers are not in the file", path.display());
    }
    let mut phdrs = vec![0u8; (phentsize * phnum) as usize];
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(phoff))?;
    f.read_exact(&mut phdrs)?;
    for ph in phdrs.chunks_exact(phentsize as usize) {
        let (kind, offset, filesz) = (u32::from(u16_at(ph, 0)) | u32::from(u16_at(ph, 2)) << 16, u64_at(ph, 8), u64_at(ph, 32));
        if kind == 1 && offset.saturating_add(filesz) > size {
            bail!("{}: a segment ends at {} past the file's {size} bytes (cut short)", path.display(), offset.saturating_add(filesz));
        }
    }
    Ok(())
}

/// Bytes free for an unprivileged writer on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: statvfs is plain data, for which all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        bail!("statvfs {}: {}", dir.display(), std::io::Error::last_os_error());
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// A started server, killed and reaped when dropped.
struct Running(Option<Child>);

impl Running {
    fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    fn wait_timeout(&mut self, limit: Duration) -> Result<Option<std::process::ExitStatus>> {
        let Some(c) = self.0.as_mut() else { return Ok(None) };
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(s) = c.try_wait()? {
                self.0 = None;
                return Ok(Some(s));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(None)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start(p: &Program, server: &Path, dir: &Path, data: &Path) -> Result<Child> {
    let mut cmd = Command::new(server);
    match p.name {
        "redis" => {
            cmd.args(["--port", &p.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--io-threads", "4", "--daemonize", "no"]);
            cmd.arg("--dir").arg(data);
        }
        "memcached" => {
            cmd.args(["-l", "127.0.0.1", "-p", &p.port.to_string(), "-U", "0", "-t", "4", "-m", "64", "-u", "root"]);
        }
        _ => {
            let install = Command::new("mariadb-install-db")
                .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db"])
                .arg(format!("--datadir={}", data.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .context("running mariadb-install-db")?;
            if !install.success() {
                bail!("mariadb-install-db failed ({install})");
            }
            // The pool's maximum too: by default mariadbd (10.11.19) reserves 8 TiB of address
            // space for it (my_large_virtual_alloc: PROT_NONE, private, anonymous). gcore dumps
            // such a mapping (coredump_filter bit 0) and reads it through /proc/PID/mem as
            // zeros, so it writes 8 TiB, not sparse; RLIMIT_FSIZE stops it with EFBIG, bfd
            // fails to close the file, and the ELF header it writes last is never written
            // (gcore still exits 0: the file exists). The kernel's dump is cut by RLIMIT_CORE.
            cmd.args(["--no-defaults", "--user=root", "--core-file", "--innodb-buffer-pool-size=32M", "--innodb-buffer-pool-size-max=32M", "--bind-address=127.0.0.1"]);
            cmd.arg(format!("--port={}", p.port));
            cmd.arg(format!("--datadir={}", data.display()));
            cmd.arg(format!("--socket={}", data.join("sock").display()));
            cmd.arg(format!("--pid-file={}", data.join("pid").display()));
        }
    }
    cmd.current_dir(dir).stdin(Stdio::null()).stdout(Stdio::null()).stderr(fs::File::create(dir.join("server.log"))?);
    let signal = p.kernel_signal;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // An ignored signal stays ignored across exec, and a shell without job control
            // starts background commands with SIGQUIT ignored: the server would then never dump.
            libc::signal(signal, libc::SIG_DFL);
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::getrlimit(libc::RLIMIT_CORE, &mut lim) == 0 {
                lim.rlim_cur = lim.rlim_max.min(MAX_CORE_BYTES);
                libc::setrlimit(libc::RLIMIT_CORE, &lim);
            }
            Ok(())
        });
    }
    cmd.spawn().with_context(|| format!("starting {}", server.display()))
}

fn wait_ready(p: &Program, data: &Path, pid: u32) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("{} exited before it was ready", p.name);
        }
        let ready = match p.name {
            "mariadb" => data.join("sock").exists() && TcpStream::connect(("127.0.0.1", p.port)).is_ok(),
            _ => TcpStream::connect(("127.0.0.1", p.port)).is_ok(),
        };
        if ready {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{} was not ready after 60 s", p.name)
}

/// Some work, so the dump is a service's: keys stored, a table filled.
fn load(p: &Program, data: &Path) -> Result<()> {
    const KEYS: usize = 20_000;
    match p.name {
        "redis" => {
            let mut s = TcpStream::connect(("127.0.0.1", p.port))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            let mut req = String::new();
            for i in 0..KEYS {
                req.push_str(&format!("SET key:{i} value-{i}-{}\r\n", "x".repeat(i % 64)));
            }
            s.write_all(req.as_bytes())?;
            read_until_count(&mut s, b"+OK\r\n", KEYS)
        }
        "memcached" => {
            let mut s = TcpStream::connect(("127.0.0.1", p.port))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            let mut req = String::new();
            for i in 0..KEYS {
                let v = format!("value-{i}-{}", "x".repeat(i % 64));
                req.push_str(&format!("set key:{i} 0 0 {}\r\n{v}\r\n", v.len()));
            }
            s.write_all(req.as_bytes())?;
            read_until_count(&mut s, b"STORED\r\n", KEYS)
        }
        _ => {
            let mut sql = String::from("CREATE DATABASE bench; CREATE TABLE bench.t (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=InnoDB;");
            for chunk in 0..20 {
                sql.push_str("INSERT INTO bench.t VALUES ");
                let rows: Vec<String> = (0..1000).map(|j| chunk * 1000 + j).map(|i| format!("({i},'value-{i}')")).collect();
                sql.push_str(&rows.join(","));
                sql.push(';');
            }
            sql.push_str("SELECT COUNT(*) FROM bench.t;");
            let mut client = Command::new("mariadb")
                .args(["--no-defaults", "-uroot"])
                .arg(format!("--socket={}", data.join("sock").display()))
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .context("running the mariadb client")?;
            if let Some(mut stdin) = client.stdin.take() {
                stdin.write_all(sql.as_bytes())?;
            }
            let out = client.wait_with_output()?;
            if !out.status.success() {
                bail!("mariadb client: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
            Ok(())
        }
    }
}

fn read_until_count(s: &mut TcpStream, reply: &[u8], count: usize) -> Result<()> {
    let mut seen = 0;
    let mut buf = vec![0u8; 1 << 16];
    let mut tail: Vec<u8> = Vec::new();
    while seen < count {
        let n = s.read(&mut buf)?;
        if n == 0 {
            bail!("connection closed after {seen} of {count} replies");
        }
        tail.extend_from_slice(&buf[..n]);
        seen += tail.windows(reply.len()).filter(|w| *w == reply).count();
        let keep = tail.len().saturating_sub(reply.len() - 1);
        tail.drain(..keep);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_elf_cores_pass() {
        let dir = std::env::temp_dir().join(format!("knot-xtask-check-core-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../samples/dumps/abba/gcore/core.gz");
        let core = dir.join("core");
        let unpacked = Command::new("zcat").arg(&committed).stdout(fs::File::create(&core).unwrap()).status();
        if !unpacked.is_ok_and(|s| s.success()) {
            eprintln!("skipped: zcat could not unpack {}", committed.display());
            return;
        }
        assert!(check_core(&core).is_ok(), "{:?}", check_core(&core));
        // Cut short: its last segments are no longer in the file.
        let len = fs::metadata(&core).unwrap().len();
        fs::OpenOptions::new().write(true).open(&core).unwrap().set_len(len / 2).unwrap();
        assert!(check_core(&core).is_err());
        // Not ELF (as gcore's 8 TiB file of mariadbd), or not a core.
        fs::write(&core, vec![0u8; 4096]).unwrap();
        assert!(check_core(&core).is_err());
        let exe = fs::read("/proc/self/exe").unwrap();
        fs::write(&core, &exe[..4096.min(exe.len())]).unwrap();
        assert!(check_core(&core).unwrap_err().to_string().contains("not a core"));
        let _ = fs::remove_dir_all(&dir);
    }
}
