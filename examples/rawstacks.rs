// Dev aid: prints every thread's raw frames (module+offset, trust) without symbols.
fn main() {
    let path = std::env::args().nth(1).expect("core path");
    let p = knot::process::Process::open(&path, &knot::process::Locator::default()).expect("open");
    for m in &p.modules { eprintln!("{:?}", m); }
    for d in p.all_diagnostics() { eprintln!("diag: {:?}", d); }
    let u = knot::unwind::Unwinder::new(&p);
    for s in u.walk_all() {
        println!("thread {}", s.tid);
        for (i, f) in s.frames.iter().enumerate() {
            let m = p.module_at(f.lookup_address()).map(|(_, m)| format!("{}+{:#x}", m.name(), f.ip - m.bias)).unwrap_or_default();
            println!("  #{i} {:#x} {:?} {}", f.ip, f.trust, m);
        }
        println!("  end: {:?}", s.end);
    }
}
