//! rust_release_abba: a std::sync::Mutex ABBA deadlock in a release build
//! (-C opt-level=2), with neighbours that hold pointers near the locks.
//!
//! restock holds INVENTORY and waits for PRICES; reprice holds PRICES and waits
//! for INVENTORY. Beside them: a thread ("clerk") that keeps pointers into the
//! statics around INVENTORY (SHELF_LABELS before it, RESTOCK_COUNT after it)
//! and an Arc<Mutex<..>> (BACKLOG, its header just before its lock) and sleeps,
//! and a thread ("courier") parked in std::thread::park, which is no lock.
//! main waits in JoinHandle::join(restock).
use std::hint::black_box;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

pub struct Stock {
    pub units: [u64; 4],
}

static SHELF_LABELS: [u64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
static INVENTORY: Mutex<Stock> = Mutex::new(Stock { units: [0; 4] });
static RESTOCK_COUNT: AtomicUsize = AtomicUsize::new(0);
static PRICES: Mutex<[u64; 4]> = Mutex::new([0; 4]);
static ARRIVALS: AtomicUsize = AtomicUsize::new(0);
static BOTH_HOLD: Barrier = Barrier::new(2);

fn arrive() {
    ARRIVALS.fetch_add(1, Ordering::SeqCst);
}

#[inline(never)]
fn restock(amount: u64) -> u64 {
    let mut stock = INVENTORY.lock().unwrap();
    stock.units[0] += amount;
    BOTH_HOLD.wait();
    arrive();
    let prices = PRICES.lock().unwrap();
    stock.units[1] = prices[0];
    stock.units[0]
}

#[inline(never)]
fn reprice(factor: u64) -> u64 {
    let mut prices = PRICES.lock().unwrap();
    prices[0] *= factor;
    BOTH_HOLD.wait();
    arrive();
    let stock = INVENTORY.lock().unwrap();
    prices[1] = stock.units[0];
    prices[0]
}

/// Holds pointers into the neighbours of the locks (and an Arc's header) and sleeps.
#[inline(never)]
fn clerk(backlog: Arc<Mutex<Vec<u64>>>) {
    let labels = black_box(&SHELF_LABELS[7]);
    let count = black_box(&RESTOCK_COUNT);
    let backlog = black_box(backlog);
    arrive();
    loop {
        thread::sleep(Duration::from_secs(3600));
        black_box((labels, count, &backlog));
    }
}

fn main() {
    let backlog = Arc::new(Mutex::new(vec![1u64, 2, 3]));
    let first = thread::Builder::new().name("restock".into()).spawn(|| restock(black_box(5))).expect("spawn");
    thread::Builder::new().name("reprice".into()).spawn(|| reprice(black_box(3))).expect("spawn");
    let theirs = Arc::clone(&backlog);
    thread::Builder::new().name("clerk".into()).spawn(move || clerk(theirs)).expect("spawn");
    thread::Builder::new()
        .name("courier".into())
        .spawn(|| {
            arrive();
            loop {
                thread::park();
            }
        })
        .expect("spawn");
    while ARRIVALS.load(Ordering::SeqCst) < 4 {
        thread::sleep(Duration::from_millis(1));
    }
    let mut out = std::io::stdout();
    out.write_all(b"ready\n").expect("stdout");
    out.flush().expect("stdout");
    let _ = first.join();
    drop(backlog);
}
