import time, json, sys
t0=time.perf_counter()
from tvm_latmodel.hardware.calibrate import calibrate_host
import tvm_latmodel
s=calibrate_host(quick=True, progress=False)
print(json.dumps({"code": sys.argv[1], "file": tvm_latmodel.__file__, "wall_s": round(time.perf_counter()-t0,2),
  "bw": {m.name: round(m.bandwidth_gbps,1) for m in s.memory},
  "bw1": {m.name: round(m.single_core_bandwidth_gbps,1) for m in s.memory}, "peak": round(s.peak_gflops,1)}))
