//! rust_mutex: std::sync::Mutex ABBA deadlock.
//! ledger_then_audit holds LEDGER, waits AUDIT; audit_then_ledger holds
//! AUDIT, waits LEDGER. main waits in JoinHandle::join.
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

static LEDGER: Mutex<u64> = Mutex::new(0);
static AUDIT: Mutex<u64> = Mutex::new(0);
static ARRIVALS: AtomicUsize = AtomicUsize::new(0);
static BOTH_HOLD: Barrier = Barrier::new(2);

fn arrive() {
    ARRIVALS.fetch_add(1, Ordering::SeqCst);
}

#[inline(never)]
fn ledger_then_audit() {
    let mut ledger = LEDGER.lock().unwrap();
    BOTH_HOLD.wait();
    arrive();
    let audit = AUDIT.lock().unwrap();
    *ledger += *audit;
}

#[inline(never)]
fn audit_then_ledger() {
    let mut audit = AUDIT.lock().unwrap();
    BOTH_HOLD.wait();
    arrive();
    let ledger = LEDGER.lock().unwrap();
    *audit += *ledger;
}

fn main() {
    let first = thread::Builder::new()
        .name("ledger".into())
        .spawn(ledger_then_audit)
        .expect("spawn");
    thread::Builder::new()
        .name("audit".into())
        .spawn(audit_then_ledger)
        .expect("spawn");
    while ARRIVALS.load(Ordering::SeqCst) < 2 {
        thread::sleep(Duration::from_millis(1));
    }
    let mut out = std::io::stdout();
    out.write_all(b"ready\n").expect("stdout");
    out.flush().expect("stdout");
    let _ = first.join();
}
