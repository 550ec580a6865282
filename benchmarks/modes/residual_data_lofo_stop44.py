"""Stop 44 part 3 (PROTOCOL_stop44.md): does the shipped residual gain from sets 24 and 25 (the 30 Intel logs that
judged R1 at stop 43)?

R1 = the shipped recipe (``benchmarks/shipped_residual_logs.txt``: the 54 re-measured logs and 46 Intel logs);
R2 = R1's logs and sets 24-25. The checks are stop 43's (``residual_data_lofo_stop43.compare``, its code): LOFO
over the 13 families of ``cpu-rocketlake-te`` (every log of both recipes, sets 24-25 included, held out by
family) and the network logs of ``cpu-znver3-net`` and ``cpu-znver4-net``. Run from the repository root:

    FEATURE_CACHE=DIR python benchmarks/modes/residual_data_lofo_stop44.py OUT.json
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks", "modes"))
import residual_data_lofo_stop43 as r43  # noqa: E402

SETS_24_25 = frozenset({"T2D_10", "C3D_6", "DIL_8", "CBR_10", "GMM_13", "C1D_13", "DEP_20", "C2D_19", "GRP_12", "NRM_11",
                        "T2D_11", "T2D_12", "C3D_7", "C3D_8", "DIL_9", "DIL_10", "CBR_11", "CBR_12", "GMM_14", "GMM_15",
                        "C1D_14", "C1D_15", "DEP_21", "DEP_22", "C2D_20", "C2D_21", "GRP_13", "GRP_14", "NRM_12",
                        "NRM_13"})


def main(out: str) -> None:
    warnings.simplefilter("ignore")
    zen4 = r43.featurise("tuning_logs/remeasured-znver4")
    intel = r43.featurise("tuning_logs/cpu-rocketlake-te", keep=r43.INTEL_LOGS | SETS_24_25)
    nets = {**r43.featurise("tuning_logs/cpu-znver3-net"), **r43.featurise("tuning_logs/cpu-znver4-net")}
    data = {**zen4, **intel, **nets}
    r1 = sorted(zen4) + sorted(n for n in intel if n in r43.INTEL_LOGS)
    recipes = {"R1": r1, "R2": r1 + sorted(n for n in intel if n in SETS_24_25)}
    assert len(recipes["R2"]) - len(r1) == 30, "sets 24-25: 30 logs"
    r43.compare(recipes, data, list(zen4) + list(intel), nets, out)


if __name__ == "__main__":
    main(sys.argv[1])
