"""Reads the summary.json scripts/gpu-check.sh wrote and prints, per check, its
name and result (in order), then the count of failed checks.

usage: check_gpu_summary.py SUMMARY.json
"""
import json
import sys


def main():
    with open(sys.argv[1]) as f:
        summary = json.load(f)
    for check in summary["checks"]:
        print(f"{check['check']}: {check['result']}")
    failed = sum(1 for c in summary["checks"] if c["result"] == "FAIL")
    if failed != summary["failed"]:
        sys.exit(f"summary says {summary['failed']} failed, its checks {failed}")
    print(f"failed: {failed}")


if __name__ == "__main__":
    main()
