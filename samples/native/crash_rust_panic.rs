//! crash_rust_panic: a Rust panic on a named worker thread, built with
//! `-C panic=abort`: the panic hook prints, then abort() raises SIGABRT.
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

static ARRIVALS: AtomicUsize = AtomicUsize::new(0);

#[inline(never)]
fn settle(balance: i64, amount: i64) -> i64 {
    let total = balance + amount;
    if total < 0 {
        panic!("balance went negative: {total}");
    }
    total
}

#[inline(never)]
fn settler() {
    ARRIVALS.fetch_add(1, Ordering::SeqCst);
    let mut go = [0u8; 1];
    let _ = std::io::stdin().read(&mut go);
    let total = settle(std::hint::black_box(-40), 25);
    println!("{total}");
}

fn main() {
    let worker = thread::Builder::new().name("settler".into()).spawn(settler).expect("spawn");
    while ARRIVALS.load(Ordering::SeqCst) < 1 {
        thread::sleep(Duration::from_millis(1));
    }
    println!("ready");
    std::io::stdout().flush().expect("flush");
    let _ = worker.join();
}
