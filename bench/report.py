# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpuhost.tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Summarise bench/out/measurements.jsonl (+ the bench_stats files) into bench/results.json,
bench/RESULTS.md and bench/wall_time.png. Called at the end of bench/run.sh; can be re-run on
an existing bench/out: `python bench/report.py --out bench/out --sizes "1 8 32" --forks 8`.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

LABELS = {  # run label -> what it is, in the order the runs are made
    "ping": "floor: ansible all -m ansible.builtin.ping",
    "audit": "audit (gpuhost.tuning.audit)",
    "plan": "plan (gpuhost.tuning.plan: tune in check mode on the untuned seed trees, and the "
            "plan's files)",
    "tune_first": "tune, first run (gpuhost.tuning.tune)",
    "tune_again": "tune again, nothing to change",
    "audit_check": "audit --check",
    "apply": "apply (gpuhost.tuning.apply of the plan run's last plan, on fresh seed trees like "
             "the ones it was made on: every host's fingerprint matches)",
    "replan": "plan again after the apply (its plan.json must have nothing left to change)",
    "oneshot_first": "peer: the seeds' one-shot fix script (bench/peers/fix-runtime.sh) as one "
                     "ansible.builtin.script task, first run on fresh trees",
    "oneshot_again": "peer: the one-shot script again (it re-applies everything)",
    "tasks_first": "peer: task-per-setting role (ansible.posix.sysctl per key, a command per "
                   "idle-state file, setpci per device, community.general.modprobe), first run "
                   "on fresh trees",
    "tasks_again": "peer: task-per-setting role again, nothing to change",
}
# Ours against the peers, same hosts, same run: (ours, peer, how many times faster ours must
# be at the largest N, by wall time; 1.0 = no slower).
PEER_GOALS = (("tune_again", "tasks_again", 5.0), ("tune_again", "oneshot_again", 1.0))
TARGETS = {"audit": 1.5, "tune_again": 2.0}  # at most this many times the floor, per host
# At most this many times another run's CPU (controller + hosts) at the same N, the largest
# measured: (run, against, limit). Issue 40: the plan costs at most 1.3x the audit. Issue 39:
# the audit at most 1.4x and the no-change tune at most 1.5x the ping floor's CPU (at 64
# hosts, 3 repeats: the first audit of a run compiles the modules' code on each host, the
# others find it in the host's cache; the medians count both).
CPU_TARGETS = (("plan", "audit", 1.3), ("audit", "ping", 1.4), ("tune_again", "ping", 1.5))


def machine():
    def cmd(args):
        try:
            out = subprocess.run(args, capture_output=True, text=True, check=False)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, IndexError):
            return "unknown"

    model = "unknown"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as handle:
        mem_kib = int(handle.readline().split()[1])
    try:
        from ansible.release import __version__ as ansible_core
    except ImportError:
        ansible_core = "unknown"
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu_model": model,
        "ram_gib": round(mem_kib / 1024.0 / 1024.0, 1),
        "kernel": platform.release(),
        "os": cmd(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "controller_python": platform.python_version(),
        "hosts_python": cmd(["/usr/bin/python3", "--version"]) + (
            "" if os.environ.get("BENCH_PY313", "none") == "none" else
            "; BENCH_PY313=%s: %s in a Debian 13 root (%s)" % (
                os.environ["BENCH_PY313"],
                cmd(["chroot", os.environ.get("BENCH_TRIXIE", "/nonexistent"),
                     "/usr/bin/python3.13", "--version"]),
                cmd(["chroot", os.environ.get("BENCH_TRIXIE", "/nonexistent"),
                     "/usr/sbin/sshd", "-V"]))),
        "ansible_core": ansible_core,
        "openssh": cmd(["ssh", "-V"]),
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
    }


def load_stats(out, ident):
    path = os.path.join(out, ident + ".stats.json")
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)


def summarise(out, records):
    """One entry per (n, label): medians over the repeats, task counts from the stats."""
    groups = {}
    for rec in records:
        groups.setdefault((rec["n"], rec["label"]), []).append(rec)
    rows = {}
    for (n, label), recs in sorted(groups.items()):
        walls = sorted(r["seconds"] for r in recs)
        median_rec = min(recs, key=lambda r: abs(r["seconds"] - statistics.median(walls)))
        stats = load_stats(out, median_rec["log"])
        tasks_per_host = changed = items = None
        top = []
        breakdown = {}
        if stats and stats["hosts"]:
            per_host = [c["ok"] + c["failed"] + c["skipped"] + c["unreachable"]
                        for c in stats["hosts"].values()]
            tasks_per_host = round(statistics.mean(per_host), 2)
            items = round(statistics.mean(c["items"] for c in stats["hosts"].values()), 2)
            changed = sum(c["changed"] for c in stats["hosts"].values())
            breakdown = {}
            for task in stats["tasks"]:
                part = breakdown.setdefault(task.get("where", "host"), {
                    "tasks": 0, "runs_per_host": 0.0, "seconds": 0.0})
                part["tasks"] += 1
                part["runs_per_host"] += (task["results"] - task.get("skipped", 0)) / float(n)
                part["seconds"] += task["seconds"]
            for part in breakdown.values():
                part["runs_per_host"] = round(part["runs_per_host"], 2)
                part["seconds"] = round(part["seconds"], 2)
            top = sorted(stats["tasks"], key=lambda t: -t["seconds"])[:5]
            top = [{"task": t["name"], "seconds": t["seconds"]} for t in top]
        by_python = {}
        for python in sorted({k for r in recs for k in r.get("hosts_by_python", {})}):
            have = [r["hosts_by_python"][python] for r in recs
                    if python in r.get("hosts_by_python", {})]
            by_python[python] = {"hosts": have[0][0],
                                 "cpu_s": round(statistics.median(h[1] for h in have), 3)}
        rows[(n, label)] = {
            "n": n, "label": label, "repeats": len(recs),
            "hosts_by_python": by_python,
            "wall_s": round(statistics.median(walls), 3),
            "wall_min_s": walls[0], "wall_max_s": walls[-1],
            "per_host_s": round(statistics.median(walls) / n, 4),
            "controller_cpu_s": round(statistics.median(r["controller_cpu"] for r in recs), 3),
            "hosts_cpu_s": round(statistics.median(r["hosts_cpu"] for r in recs), 3),
            "load_before": round(statistics.median(r["load_before"] for r in recs), 2),
            "failed_runs": sum(1 for r in recs if r["rc"] != 0),
            "tasks_per_host": tasks_per_host,
            "loop_items_per_host": items,
            "changed_total": changed,
            "slowest_tasks": top,
            "where_time_goes": breakdown,
        }
    for (n, _label), row in rows.items():
        floor = rows.get((n, "ping"))
        if floor:
            row["ratio_to_floor"] = round(row["wall_s"] / floor["wall_s"], 2)
            cpu = row["controller_cpu_s"] + row["hosts_cpu_s"]
            floor_cpu = floor["controller_cpu_s"] + floor["hosts_cpu_s"]
            row["cpu_ratio_to_floor"] = round(cpu / floor_cpu, 2) if floor_cpu else None
    return rows


def marginal(rows, sizes):
    """Cost of one more host between consecutive N: (wall(N2) - wall(N1)) / (N2 - N1)."""
    result = {}
    for label in LABELS:
        points = [(n, rows[(n, label)]["wall_s"]) for n in sizes if (n, label) in rows]
        steps = []
        for (n1, w1), (n2, w2) in zip(points, points[1:], strict=False):
            steps.append({"from": n1, "to": n2, "per_host_s": round((w2 - w1) / (n2 - n1), 4)})
        if len(points) >= 2:
            xs = [p[0] for p in points]
            ys = [p[1] for p in points]
            mx, my = statistics.mean(xs), statistics.mean(ys)
            sxx = sum((x - mx) ** 2 for x in xs)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
            intercept = my - slope * mx
            ss_tot = sum((y - my) ** 2 for y in ys)
            ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
            cpus = [rows[(n, label)]["controller_cpu_s"] + rows[(n, label)]["hosts_cpu_s"]
                    for n in xs]
            mc = statistics.mean(cpus)
            cpu_slope = sum((x - mx) * (c - mc) for x, c in zip(xs, cpus, strict=True)) / sxx
            fit = {"fixed_s": round(intercept, 3), "per_host_s": round(slope, 4),
                   "r2": round(1 - ss_res / ss_tot, 4) if ss_tot else 1.0,
                   "cpu_per_host_s": round(cpu_slope, 4)}
            result[label] = {"steps": steps, "linear_fit": fit}
    return result


def verdicts(rows, margins, sizes):
    out = []
    for label, limit in TARGETS.items():
        have = [n for n in sizes if (n, label) in rows]
        big = max(have) if have else max(sizes)
        row = rows.get((big, label))
        if not row or "ratio_to_floor" not in row:
            out.append({"target": "%s <= %.1fx floor per host" % (label, limit),
                        "met": None, "why": "not measured"})
            continue
        m_label = margins.get(label, {}).get("linear_fit", {}).get("per_host_s")
        m_floor = margins.get("ping", {}).get("linear_fit", {}).get("per_host_s")
        m_ratio = round(m_label / m_floor, 2) if m_label and m_floor else None
        out.append({
            "target": "%s <= %.1fx floor per host" % (label, limit),
            "at_n": big, "ratio": row["ratio_to_floor"], "marginal_ratio": m_ratio,
            "met": row["ratio_to_floor"] <= limit,
        })
    for label, base, limit in CPU_TARGETS:
        target = "%s <= %.1fx the %s's CPU" % (label, limit, base)
        have = [n for n in sizes if (n, label) in rows and (n, base) in rows]
        if not have:
            out.append({"target": target, "met": None, "why": "not measured"})
            continue
        big = max(have)
        row, other = rows[(big, label)], rows[(big, base)]
        cpu = row["controller_cpu_s"] + row["hosts_cpu_s"]
        base_cpu = other["controller_cpu_s"] + other["hosts_cpu_s"]
        ratio = round(cpu / base_cpu, 2) if base_cpu else None
        out.append({
            "target": target, "at_n": big, "against": base, "cpu_ratio": ratio,
            "wall_ratio": round(row["wall_s"] / other["wall_s"], 2),
            "met": ratio is not None and ratio <= limit,
        })
    return out


def markdown(info, rows, margins, checks, sizes, forks, others=None):
    lines = [
        "# Fleet benchmark results",
        "",
        "Produced by `make bench` (bench/run.sh); do not edit by hand.",
        "",
        "Machine: %(cores)s cores (%(cpu_model)s), %(ram_gib)s GiB RAM, %(os)s, kernel "
        "%(kernel)s; controller Python %(controller_python)s, hosts %(hosts_python)s, "
        "ansible-core %(ansible_core)s, %(openssh)s. Date: %(date)s. Collection at %(commit)s."
        % info,
        "",
        "Fleet: every host is a network namespace with its own sshd and its own seed host tree "
        "(tests/fixtures/hosts.py `seed_host`), all on this one machine: the hosts' module "
        "runs and the controller share its %s cores. forks=%d, pipelining on, ControlPersist "
        "60s, gather_facts false, `ansible_python_interpreter=/usr/bin/python3`. Each run "
        "starts cold (fresh ssh control sockets). Wall time is the median of the repeats; "
        "CPU is the controller's (ansible and its children) plus the hosts' (everything the "
        "sshd's ran), so it does not depend on other load on the machine." % (
            info["cores"], forks),
        "",
        "| N | run | wall s | per host s | x floor | CPU s (ctl + hosts) | x floor CPU "
        "| tasks/host | changed | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        for label in LABELS:
            row = rows.get((n, label))
            if not row:
                continue
            lines.append("| %d | %s%s | %.2f | %.3f | %s | %.1f + %.1f | %s | %s | %s | %.1f |" % (
                n, label, " (FAILED %d)" % row["failed_runs"] if row["failed_runs"] else "",
                row["wall_s"], row["per_host_s"], row.get("ratio_to_floor", "-"),
                row["controller_cpu_s"], row["hosts_cpu_s"],
                row.get("cpu_ratio_to_floor", "-"),
                row["tasks_per_host"] if row["tasks_per_host"] is not None else "-",
                row["changed_total"] if row["changed_total"] is not None else "-",
                row["load_before"]))
    lines += ["", "Runs: " + "; ".join("`%s` = %s" % item for item in LABELS.items()), ""]
    lines += ["## Growth with N (least-squares fit of wall time = fixed + per host x N)", "",
              "| run | fixed s | per host s | x floor per host | R^2 | per host between sizes "
              "| CPU s per host | x floor CPU per host |",
              "|---|---:|---:|---:|---:|---|---:|---:|"]
    floor_slope = margins.get("ping", {}).get("linear_fit", {}).get("per_host_s")
    for label in LABELS:
        if label not in margins:
            continue
        fit = margins[label]["linear_fit"]
        ratio = ("%.2f" % (fit["per_host_s"] / floor_slope)) if floor_slope else "-"
        steps = ", ".join("%d->%d: %.3f" % (s["from"], s["to"], s["per_host_s"])
                          for s in margins[label]["steps"])
        floor_cpu = margins["ping"]["linear_fit"]["cpu_per_host_s"]
        lines.append("| %s | %.2f | %.3f | %s | %.3f | %s | %.3f | %.2f |" % (
            label, fit["fixed_s"], fit["per_host_s"], ratio, fit["r2"], steps,
            fit["cpu_per_host_s"], fit["cpu_per_host_s"] / floor_cpu))
    lines += ["", "## Targets", ""]
    for check in checks:
        if check["met"] is None:
            lines.append("- %s: not measured" % check["target"])
        elif "against" in check:
            lines.append("- %s: %s at N=%d (%sx CPU, %.2fx wall time)" % (
                check["target"], "met" if check["met"] else "MISSED", check["at_n"],
                "-" if check["cpu_ratio"] is None else "%.2f" % check["cpu_ratio"],
                check["wall_ratio"]))
        else:
            marg = ("; %.2fx in the per-host slope over N" % check["marginal_ratio"]
                    if check["marginal_ratio"] is not None else "")
            lines.append("- %s: %s at N=%d (%.2fx wall per host%s)" % (
                check["target"], "met" if check["met"] else "MISSED", check["at_n"],
                check["ratio"], marg))
    peers = peer_table(rows, sizes)
    if peers:
        lines += ["", "## Ours beside the peers (same hosts, same run)", "",
                  "Ours does snapshot, sysctl (now and persisted), idle states, MRRS, the boot "
                  "service, nvidia_peermem, verify (an audit) and the report; the one-shot "
                  "script applies the runtime settings only (no persistence, no check); the "
                  "task-per-setting role applies and persists the sysctls, the idle states "
                  "and MRRS (nothing at boot, no snapshot, no verify). `x` = wall time against "
                  "the ping floor of the same N (CPU ratio in brackets); `ours faster` = the "
                  "peer's wall time / ours (CPU in brackets).", "",
                  "| N | tune first | tune again | one-shot first | one-shot again "
                  "| tasks first | tasks again | ours faster than tasks (again) "
                  "| ours faster than one-shot (again) | load |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for item in peers:
            lines.append("| %d | %s |" % (item["n"], " | ".join(item["cells"])))
        lines += [""]
        for goal in peer_goals(rows, sizes):
            lines.append("- %s" % goal["text"])
    py_lines = python_table([("this run", rows)] + list(others or []), sizes)
    if py_lines and (others or any(len(r.get("hosts_by_python") or {}) > 1
                                   or "3.13" in (r.get("hosts_by_python") or {})
                                   for r in rows.values())):
        lines += ["", "## Hosts by target Python (3.11: Debian 12's; 3.13: Debian 13's, "
                  "bench/trixie-hosts.sh)", "",
                  "The same playbooks on hosts whose modules run on Python 3.13 (sshd "
                  "chrooted into a Debian 13 root in the host's namespace, "
                  "`ansible_python_interpreter=/usr/bin/python3.13`). `x floor` is against "
                  "the ping floor of the same run and N, wall time then CPU (controller + "
                  "hosts); in a mixed fleet only the hosts' CPU can be told apart. CPU per "
                  "host is (controller + hosts) / N; hosts' CPU per host is what that "
                  "Python's hosts ran (sessions, shells, module Pythons).", "",
                  "| N | Python | run | hosts | audit x floor | audit x floor CPU "
                  "| tune_again x floor | tune_again x floor CPU "
                  "| CPU per host s: ping / audit / tune_again "
                  "| hosts' CPU per host s: ping / audit / tune_again | load |",
                  "|---:|---|---|---:|---:|---:|---:|---:|---|---|---|"] + py_lines
    lines += ["", "## Where the time goes (largest N of each run)", "",
              "Tasks by where they run: `host` = a module round trip to each host (ssh, "
              "python, the module), `controller` = an action that never leaves the controller "
              "(set_fact, debug, fail, argument validation: still one worker process per host), "
              "`delegated` = run on the controller for each host (delegate_to: localhost). "
              "Runs per host count only what was not skipped; seconds are summed task spans.",
              "", "| run | N | host: tasks, runs/host, s | controller: tasks, runs/host, s "
              "| delegated: tasks, runs/host, s |", "|---|---:|---|---|---|"]
    for label in LABELS:
        have = [n for n in sizes if (n, label) in rows]
        row = rows.get((max(have), label)) if have else None
        if not row or not row["where_time_goes"]:
            continue
        cells = []
        for where in ("host", "controller", "delegated"):
            part = row["where_time_goes"].get(where)
            cells.append("%d, %.2f, %.1f" % (
                part["tasks"], part["runs_per_host"], part["seconds"]) if part else "-")
        lines.append("| %s | %d | %s |" % (label, row["n"], " | ".join(cells)))
    lines += ["", "## Slowest tasks (largest N of each run; seconds from task start to last "
              "host result)", ""]
    for label in LABELS:
        have = [n for n in sizes if (n, label) in rows]
        row = rows.get((max(have), label)) if have else None
        if row and row["slowest_tasks"]:
            lines.append("- %s at N=%d: " % (label, row["n"]) + "; ".join(
                "%s %.2f" % (t["task"], t["seconds"]) for t in row["slowest_tasks"]))
    lines.append("")
    return "\n".join(lines)


PY_LABELS = ("ping", "audit", "tune_again")


def python_table(runs, sizes):
    """Per N and target Python: audit and tune_again against the floor, CPU per host.

    runs: [(name, rows)], e.g. this run (3.11 hosts) and a BENCH_PY313=all run. A run whose
    hosts are all one Python gives whole-run ratios (wall and CPU, controller included); a
    mixed run (BENCH_PY313=half) gives one line per Python from the hosts' CPU only.
    """
    out = []
    for n in sizes:
        for name, rows in runs:
            have = dict((label, rows.get((n, label))) for label in PY_LABELS)
            if not have["ping"] or not (have["audit"] or have["tune_again"]):
                continue
            pythons = sorted(have["ping"].get("hosts_by_python") or {"3.11": None})
            for python in pythons:
                mixed = len(pythons) > 1
                cells, per_host, host_cpu = [], [], []
                for label in PY_LABELS:
                    row = have[label]
                    part = (row or {}).get("hosts_by_python", {}).get(python)
                    hosts = part["hosts"] if part else n
                    if row:
                        per_host.append("%.3f" % ((row["controller_cpu_s"]
                                                   + row["hosts_cpu_s"]) / n)
                                        if not mixed else "-")
                        host_cpu.append("%.3f" % ((part["cpu_s"] if part else
                                                   row["hosts_cpu_s"]) / hosts))
                    else:
                        per_host.append("-")
                        host_cpu.append("-")
                floor = have["ping"]
                for label in ("audit", "tune_again"):
                    row = have[label]
                    if not row:
                        cells += ["-", "-"]
                    elif mixed:
                        mine = row["hosts_by_python"][python]["cpu_s"]
                        base = floor["hosts_by_python"][python]["cpu_s"]
                        cells += ["-", "%.2fx (hosts' CPU)" % (mine / base) if base else "-"]
                    else:
                        cells += ["%.2fx" % row["ratio_to_floor"],
                                  "%.2fx" % row["cpu_ratio_to_floor"]]
                hosts = (have["ping"].get("hosts_by_python") or {}).get(python, {}).get(
                    "hosts", n)
                loads = sorted(r["load_before"] for r in have.values() if r)
                out.append("| %d | %s | %s | %d | %s | %s | %s | %.1f-%.1f |" % (
                    n, python, name, hosts, " | ".join(cells), " / ".join(per_host),
                    " / ".join(host_cpu), loads[0], loads[-1]))
    return out


def _x(row):
    if not row or "ratio_to_floor" not in row:
        return "-"
    return "%.2fx (%.2fx)" % (row["ratio_to_floor"], row["cpu_ratio_to_floor"] or 0)


def _faster(ours, peer):
    if not ours or not peer:
        return "-"
    cpu = [r["controller_cpu_s"] + r["hosts_cpu_s"] for r in (peer, ours)]
    return "%.2fx (%.2fx)" % (peer["wall_s"] / ours["wall_s"], cpu[0] / cpu[1])


def peer_table(rows, sizes):
    out = []
    for n in sizes:
        if not any((n, label) in rows for label in ("oneshot_first", "tasks_first")):
            continue
        row = dict((label, rows.get((n, label))) for label in LABELS)
        loads = sorted(r["load_before"] for r in row.values() if r)
        out.append({"n": n, "cells": [
            _x(row["tune_first"]), _x(row["tune_again"]), _x(row["oneshot_first"]),
            _x(row["oneshot_again"]), _x(row["tasks_first"]), _x(row["tasks_again"]),
            _faster(row["tune_again"], row["tasks_again"]),
            _faster(row["tune_again"], row["oneshot_again"]),
            "%.1f-%.1f" % (loads[0], loads[-1]) if loads else "-"]})
    return out


def peer_goals(rows, sizes):
    out = []
    for ours, peer, times in PEER_GOALS:
        have = [n for n in sizes if (n, ours) in rows and (n, peer) in rows]
        if not have:
            out.append({"ours": ours, "peer": peer, "times": times, "met": None,
                        "text": "%s at least %gx faster than %s: not measured"
                                % (ours, times, peer)})
            continue
        n = max(have)
        a, b = rows[(n, ours)], rows[(n, peer)]
        wall = b["wall_s"] / a["wall_s"]
        cpu = (b["controller_cpu_s"] + b["hosts_cpu_s"]) / (a["controller_cpu_s"]
                                                            + a["hosts_cpu_s"])
        met = wall >= times
        out.append({"ours": ours, "peer": peer, "times": times, "at_n": n,
                    "wall_times": round(wall, 2), "cpu_times": round(cpu, 2), "met": met,
                    "text": "%s at least %gx faster than %s: %s at N=%d (%.2fx by wall time, "
                            "%.2fx by CPU)" % (ours, times, peer, "met" if met else "MISSED",
                                               n, wall, cpu)})
    return out


def plot(rows, sizes, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for label in LABELS:
        pts = [(n, rows[(n, label)]) for n in sizes if (n, label) in rows]
        if not pts:
            continue
        ax1.plot([p[0] for p in pts], [p[1]["wall_s"] for p in pts], marker="o", label=label)
        ax2.plot([p[0] for p in pts],
                 [p[1]["controller_cpu_s"] + p[1]["hosts_cpu_s"] for p in pts],
                 marker="o", label=label)
    ax1.set_title("Wall time against fleet size")
    ax2.set_title("CPU time (controller + hosts)")
    for ax in (ax1, ax2):
        ax.set_xlabel("hosts (N)")
        ax.set_ylabel("seconds")
        ax.set_xticks(sizes)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(HERE, "out"))
    parser.add_argument("--sizes", default="1 8 32")
    parser.add_argument("--forks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dest", default=HERE)
    parser.add_argument("--also", action="append", default=[], metavar="NAME=OUT",
                        help="another run's bench/out (e.g. a BENCH_PY313=all run) for the "
                             "table of hosts by target Python")
    args = parser.parse_args()
    with open(os.path.join(args.out, "measurements.jsonl")) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    others, other_raw = [], {}
    for item in args.also:
        name, _sep, other_out = item.rpartition("=")
        with open(os.path.join(other_out, "measurements.jsonl")) as handle:
            other_raw[name] = [json.loads(line) for line in handle if line.strip()]
        others.append((name, summarise(other_out, other_raw[name])))
    measured = sorted({r["n"] for r in records})
    sizes = [n for n in (int(s) for s in args.sizes.split()) if n in measured]
    info = machine()
    rows = summarise(args.out, records)
    margins = marginal(rows, sizes)
    checks = verdicts(rows, margins, sizes)
    result = {
        "machine": info, "forks": args.forks, "sizes": sizes, "repeat": args.repeat,
        "settings": {"pipelining": True, "ssh_args": "-C -o ControlMaster=auto "
                     "-o ControlPersist=60s", "gather_facts": False,
                     "ansible_python_interpreter": "/usr/bin/python3", "cold_start": True},
        "runs": [rows[key] for key in sorted(
            rows, key=lambda k: (k[0], list(LABELS).index(k[1])))],
        "growth": margins, "targets": checks, "peer_goals": peer_goals(rows, sizes),
        "raw": records,
        "other_runs": {name: {"runs": [rows_[key] for key in sorted(
            rows_, key=lambda k: (k[0], list(LABELS).index(k[1])))], "raw": other_raw[name]}
            for name, rows_ in others},
    }
    os.makedirs(args.dest, exist_ok=True)     # BENCH_DEST may name a new folder
    with open(os.path.join(args.dest, "results.json"), "w") as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
        handle.write("\n")
    with open(os.path.join(args.dest, "RESULTS.md"), "w") as handle:
        handle.write(markdown(info, rows, margins, checks, sizes, args.forks, others))
    plot(rows, sizes, os.path.join(args.dest, "wall_time.png"))
    sys.stdout.write(markdown(info, rows, margins, checks, sizes, args.forks, others))


if __name__ == "__main__":
    main()
