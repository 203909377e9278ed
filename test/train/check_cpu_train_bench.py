"""Prints, per engine of cpu_train.py's JSON, its rounds and whether it kept the fastest."""
import json
import sys

report = json.load(open(sys.argv[1]))
for model in report["models"]:
    for engine in ("cleave", "torchscript"):
        r = model["engines"][engine]
        means = r["round_mean_step_seconds"]
        kept = r["mean_step_seconds"] == min(means) and all(m > 0 for m in means)
        print(f"{model['model']} {engine}: rounds {r['rounds']}, kept the fastest {kept}, "
              f"losses {len(r['losses'])}")
    for check in model["loss_check"]:
        print(f"{model['model']} loss check: {check['engine']} {'ok' if check['ok'] else 'FAILED'}")
