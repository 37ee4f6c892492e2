# r58: HEAD: the e4m3 rows against their cuBLASLt calls at M = 128-1024 with 50 runs and six passes.
set -u
R=$PWD
PK=mutants/out/gpu/pack
Z="env LD_LIBRARY_PATH=$R/$PK/lib $R/$PK/zstd"
command -v zstd >/dev/null && Z=zstd
mkdir -p res build /tmp/x
tar xf .dev/bin.tar -C /tmp/x
$Z -q -f -d $PK/qvet-base.zst -o /tmp/qvet-base
$Z -q -f -d --long=27 --patch-from=/tmp/qvet-base /tmp/x/qvet.patch.zst -o build/qvet
chmod +x build/qvet
pack() { tar cf $OUT/r58.tar res; }
trap pack EXIT
( time timeout 400 ./build/qvet bench --m 128,256,512,1024 --runs 50 --passes 6 --variant 'w8a8-fp8-*' --out res/big.jsonl ) > res/big.txt 2>&1; echo "big rc=$?"; tail -3 res/big.txt
