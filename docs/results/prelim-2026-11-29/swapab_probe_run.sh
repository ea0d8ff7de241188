#!/bin/bash
# builds and runs the check for a list of keys: H W K SF CF SP CP QL OL
cd "$(dirname "$0")/../.."
mkdir -p /tmp/gt && i=0
while read -r H W K SF CF SP CP QL OL; do
  [ -z "$H" ] && continue
  n=/tmp/gt/c_${H}_${W}_${K}_${SF}${CF}_${SP}_${CP}_${QL}${OL}
  (nvcc -std=c++20 -arch=sm_90a --expt-relaxed-constexpr -O2 -w -Ikernels_src -I/usr/local/cuda/include/cccl \
    -DKH=$H -DKW=$W -DKK=$K -DKSF=$SF -DKCF=$CF -DKSP=$SP -DKCP=$CP -DKQL=$QL -DKOL=$OL $EXTRA docs/results/prelim-2026-11-29/swapab_probe.cu -o $n > $n.log 2>&1 || echo "BUILD FAIL $n" ) &
  i=$((i+1)); if [ $((i % 16)) = 0 ]; then wait; fi
done < "${1:-docs/results/prelim-2026-11-29/swapab_probe_keys.txt}"
wait
for b in /tmp/gt/c_*; do [ -x "$b" ] || continue; for T in ${TOKENS:-5 1 16}; do for m in ${MODES:-0}; do timeout 20 $b $T $m || echo "EXIT $? $b $T $m"; done; done; done
