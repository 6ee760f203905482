#!/bin/sh
# SOS readings the guest run (guest-dotnet.sh) did not record: `gcheapstat` and `analyzeoom`,
# which the heap tests compare on every dump with `dumpheap -stat`. Made on the host with the
# same arm64 dotnet-dump, SOS and runtime as in the guest, run under qemu-user (binfmt, the
# guest root as QEMU_LD_PREFIX), against the guest's own dumps; `setclrpath` points SOS at the
# app's DAC (the dump names the guest's path).
#   host-sos.sh VM        (VM: target/arm64-vm, after `cargo xtask arm64-samples --dotnet`)
set -u
VM=$(cd "$1" && pwd)
I=$VM/dotnet-inputs
O=$VM/run-dotnet/out
export QEMU_LD_PREFIX=$VM/root DOTNET_ROOT=$I/dotnet DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1
for s in monitor_abba heap_population sync_over_async; do
  for c in gcheapstat analyzeoom; do
    ( cd "$O/$s/heap" && timeout 600 nice -n 19 "$I/dotnet-dump/dotnet-dump" analyze core -c "setclrpath $I/apps/$s" -c "$c" -c exit > "sos/$c.txt" 2>&1; echo "$s $c: exit $?" )
  done
done
