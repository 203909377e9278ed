"""Prints, per run of cpu_train.py's JSON (cleave, each baseline under each OpenMP policy), its
rounds and whether it kept the fastest, and whether the reference is the fastest baseline run."""
import json
import sys

report = json.load(open(sys.argv[1]))
for model in report["models"]:
    engines = model["engines"]
    for key in ("cleave", "torchscript", "torchscript*"):
        r = engines[key]
        means = r["round_mean_step_seconds"]
        kept = r["mean_step_seconds"] == min(means) and all(m > 0 for m in means)
        print(f"{model['model']} {key}: rounds {r['rounds']}, kept the fastest {kept}, "
              f"losses {len(r['losses'])}, OMP_WAIT_POLICY {r['omp_wait_policy']}")
    baselines = {k: v["mean_step_seconds"] for k, v in engines.items() if k != "cleave"}
    print(f"{model['model']} reference is the fastest baseline run: "
          f"{model['reference'] == min(baselines, key=baselines.get)}")
    for check in model["loss_check"]:
        print(f"{model['model']} loss check: {check['engine']} {'ok' if check['ok'] else 'FAILED'}")
for key, prefix in sorted(report["baseline_env"].items()):
    pairs = list(zip(prefix, prefix[1:]))
    unset = ("-u", "OMP_WAIT_POLICY") in pairs
    passive = "OMP_WAIT_POLICY=passive" in prefix
    print(f"{key}: OMP_WAIT_POLICY {'unset' if unset and not passive else 'passive' if passive and not unset else 'CONFLICTING'}")
