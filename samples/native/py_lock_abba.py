"""py_lock_abba: CPython threading locks in two ABBA deadlocks.

restock holds inventory_lock (an RLock, which records its owner) and waits for
prices_lock; reprice holds prices_lock (an RLock) and waits for inventory_lock.
ledger holds ledger_lock (a plain Lock, which records no owner) and waits for
audit_lock; audit holds audit_lock (a Lock) and waits for ledger_lock.
main joins restock (a wait on restock's own _tstate_lock, a plain Lock).
"""
import sys
import threading

inventory_lock = threading.RLock()
prices_lock = threading.RLock()
ledger_lock = threading.Lock()
audit_lock = threading.Lock()
rlocks_held = threading.Barrier(2)
locks_held = threading.Barrier(2)
arrived = threading.Semaphore(0)


def restock():
    with inventory_lock:
        rlocks_held.wait()
        arrived.release()
        with prices_lock:
            pass


def reprice():
    with prices_lock:
        rlocks_held.wait()
        arrived.release()
        with inventory_lock:
            pass


def post_ledger():
    with ledger_lock:
        locks_held.wait()
        arrived.release()
        with audit_lock:
            pass


def audit():
    with audit_lock:
        locks_held.wait()
        arrived.release()
        with ledger_lock:
            pass


def main():
    workers = [threading.Thread(target=f, name=f.__name__) for f in (restock, reprice, post_ledger, audit)]
    for w in workers:
        w.start()
    for _ in workers:
        arrived.acquire()
    print("ready", flush=True)
    workers[0].join()


if __name__ == "__main__":
    main()
