//! Real programs from Debian for `cargo xtask bench`: redis, memcached and mariadb, installed
//! with apt-get when missing (as root), started on a private port and data directory, given
//! some work (keys stored, a table filled) so their threads and heaps are a service's, then
//! dumped by gdb's `gcore` while running and by the kernel (a fatal signal with
//! RLIMIT_CORE unlimited; this machine's core_pattern must write `core` into the process's
//! directory). The cores are kept under `target/bench/programs/NAME/KIND/` and reused
//! (`--remake` makes them again).

use anyhow::{Context, Result, bail};
use knot_samples::DumpKind;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    if !remake && core.is_file() && exe_note.is_file() {
        let binary = PathBuf::from(fs::read_to_string(&exe_note)?.trim());
        return Ok(ProgramDump { name: p.name, core, binary });
    }
    let server = server_path(p).with_context(|| format!("{} is not installed (apt-get install {})", p.server, p.package))?;
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
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
            let prefix = dir.join("gcore");
            let out = Command::new("gcore").arg("-o").arg(&prefix).arg(pid.to_string()).output().context("running gcore")?;
            let made = dir.join(format!("gcore.{pid}"));
            if !out.status.success() || !made.is_file() {
                bail!("gcore {pid} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
            fs::rename(&made, &core)?;
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
        }
    }
    drop(child);
    let _ = fs::remove_dir_all(&data);
    fs::write(&exe_note, binary.display().to_string())?;
    Ok(ProgramDump { name: p.name, core, binary })
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
            cmd.args(["--no-defaults", "--user=root", "--core-file", "--innodb-buffer-pool-size=32M", "--bind-address=127.0.0.1"]);
            cmd.arg(format!("--port={}", p.port));
            cmd.arg(format!("--datadir={}", data.display()));
            cmd.arg(format!("--socket={}", data.join("sock").display()));
            cmd.arg(format!("--pid-file={}", data.join("pid").display()));
        }
    }
    cmd.current_dir(dir).stdin(Stdio::null()).stdout(Stdio::null()).stderr(fs::File::create(dir.join("server.log"))?);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::getrlimit(libc::RLIMIT_CORE, &mut lim) == 0 {
                lim.rlim_cur = lim.rlim_max;
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
