#!/usr/bin/env python3
"""Plot lateness percentiles per implementation from a bench_report output.

    cargo run --release -p timerpool-bench-tools --bin bench_report -- --runs 3 > docs/bench/report.txt
    python3 docs/bench/plot_lateness.py docs/bench/report.txt docs/bench/lateness.png

Reads the `csv,<workload>,<implementation>,p50,p90,p99,p99.9,max` lines
(medians over the report's runs, in microseconds) and draws one panel per
workload (lateness, preemption), log scale. Needs matplotlib (PyPI).
"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

QS = ["p50", "p90", "p99", "p99.9", "max"]


def main(src, dst):
    data = {}
    with open(src) as f:
        for line in f:
            if not line.startswith("csv,"):
                continue
            _, what, name, *vals = line.strip().split(",")
            data.setdefault(what, {})[name] = [max(float(v), 0.1) for v in vals]
    workloads = [w for w in ("lateness", "preemption") if w in data]
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4.5))
    if len(workloads) == 1:
        axes = [axes]
    titles = {
        "lateness": "lateness: 100,000 tasks over 2 s",
        "preemption": "preemption: task due in 1 ms, one due in 10 s pending",
    }
    for ax, what in zip(axes, workloads):
        for name, vals in data[what].items():
            ax.plot(QS, vals, marker="o", label=name)
        ax.set_yscale("log")
        ax.set_ylabel("start - due (µs, log scale)")
        ax.set_xlabel("percentile")
        ax.set_title(titles.get(what, what), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Lateness percentiles per implementation (medians of runs, one build)", fontsize=11)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
