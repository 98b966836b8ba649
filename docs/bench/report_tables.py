#!/usr/bin/env python3
"""Print the markdown tables of docs/benchmarks.md from a bench_report output.

    python3 docs/bench/report_tables.py docs/bench/report.txt

Reads the `median ± spread` rows of each section and prints one table per
workload with the ratios against each peer, so the doc's figures are copied
from the report by a program, not by hand.
"""
import re
import sys


def sections(text):
    out = {}
    cur = None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = line[3:].split(":")[0]
            workers = re.search(r"(\d+) workers", line)
            if cur == "mixed lengths" and workers:
                cur = f"mixed lengths, {workers.group(1)} workers"
            out[cur] = {}
            continue
        if cur is None or " vs " in line or line.startswith(("csv", "implementation", "#", "total")):
            continue
        m = re.match(r"^(\S+)\s+(.*)$", line)
        if not m:
            continue
        cells = re.findall(r"([\d.]+|NaN) ±\s*(\d+)%", m.group(2))
        if cells:
            out[cur][m.group(1)] = [(float(v), int(s)) for v, s in cells]
        elif cur == "idle":
            parts = m.group(2).split()
            if len(parts) == 2:
                out[cur][m.group(1)] = [(float(parts[0]), 0), (float(parts[1]), 0)]
    return out


def fmt(v):
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def main(path):
    s = sections(open(path).read())
    b = s["burst"]
    print("### Burst (M tasks/s, 1,000,000 tasks, 2 workers)\n")
    ours = [n for n in b if n.startswith("timerpool")]
    print("| implementation | M tasks/s | spread | " + " | ".join(f"{n} ratio" for n in ours) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in ours) + " |")
    for name, [(v, sp)] in b.items():
        peer = not name.startswith("timerpool")
        ratios = [f"{b[n][0][0] / v:.2f}x" if peer else "" for n in ours]
        print(f"| {name} | {v:.2f} | {sp}% | " + " | ".join(ratios) + " |")
    c = s["churn"]
    print("\n### Churn at 1,000,000 pending (ns per op; heap bytes per pending entry)\n")
    print("| implementation | insert | reschedule | cancel | B/entry | B/entry after reschedule | B/entry after cancel-all |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, cells in c.items():
        v = [x[0] for x in cells]
        print(f"| {name} | {v[0]:.0f} | {v[1]:.0f} | {v[2]:.0f} | {v[3]:.1f} | {v[4]:.1f} | {v[5]:.1f} |")
    sp = [x[1] for cells in c.values() for x in cells[:3]]
    print(f"\nSpreads of the ns figures: {min(sp)}–{max(sp)}%.\n")
    sch = [x[0] for x in c["timerpool-scheduler"]]
    print("Ratios for `timerpool-scheduler`:\n")
    print("| against | insert | reschedule | cancel | bytes/entry | bytes/entry after reschedule |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, cells in c.items():
        if name.startswith("timerpool"):
            continue
        v = [x[0] for x in cells]
        print(f"| {name} | {v[0]/sch[0]:.2f}x | {v[1]/sch[1]:.2f}x | {v[2]/sch[2]:.2f}x | {v[3]/sch[3]:.2f}x | {v[4]/sch[4]:.2f}x |")
    for what, title in (("lateness", "Lateness"), ("preemption", "Preemption")):
        w = s[what]
        print(f"\n### {title} (µs, `start - due`; CPU in % of one core)\n")
        print("| implementation | p50 | p99 | p99.9 | max | early | CPU |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, cells in w.items():
            v = [x[0] for x in cells]
            print(f"| {name} | {fmt(v[0])} | {fmt(v[1])} | {fmt(v[2])} | {fmt(v[3])} | {v[4]:.0f} | {v[5]:.1f} |")
        p50 = [x[1] for cells in w.values() for x in cells[:1]]
        p99 = [x[1] for cells in w.values() for x in cells[1:2]]
        print(f"\nSpreads: p50 {min(p50)}–{max(p50)}%, p99 {min(p99)}–{max(p99)}%.")
        stp = [x[0] for x in w["scheduled-thread-pool"]]
        for name in ("timerpool", "timerpool-spin250us"):
            v = [x[0] for x in w[name]]
            print(f"`{name}` against scheduled-thread-pool: p50 {stp[0]/v[0]:.2f}x, p99 {stp[1]/v[1]:.2f}x.")
    mixed = [k for k in s if k.startswith("mixed lengths, ")]
    if mixed:
        print("\n### Mixed task lengths (short tasks' lateness, µs; stalls > 1 ms with a worker free)\n")
        print("| workers | implementation | p50 | p99 | p99.9 | max | stalls | CPU % |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        spreads = []
        for key in mixed:
            workers = key.split(", ")[1].split()[0]
            for name, cells in s[key].items():
                v = [x[0] for x in cells]
                spreads += [x[1] for x in cells[2:5]]
                print(f"| {workers} | {name} | {fmt(v[0])} | {fmt(v[1])} | {fmt(v[2])} | {fmt(v[3])} | {v[4]:.0f} | {v[6]:.1f} |")
        print(f"\nSpreads of p99.9, max and stalls: {min(spreads)}–{max(spreads)}%.")
    i = s["idle"]
    print("\n### Idle (10,000 timers due in an hour, 3 s)\n")
    print("| implementation | CPU | context switches of the pool's threads |")
    print("| --- | --- | --- |")
    for name, cells in i.items():
        print(f"| {name} | {cells[0][0]:.3f} ms | {cells[1][0]:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1])
