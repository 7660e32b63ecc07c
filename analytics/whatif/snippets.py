"""Configuration snippets for each scheduler, one renderer per kind of change.

Facts from docs (reference: SCHEDULERS.md): Slurm PreemptExemptTime (global or
per QOS) and GraceTime (partition or QOS), QOS GrpTRES / MaxTRESPerUser /
UsageFactor; KAI Queue `spec.preemptMinRuntime` / `reclaimMinRuntime` and the
time-based fairshare `usageDBConfig.usageParams`; Volcano `volcano.sh/cooldown-time`
with the `cdp` plugin; Kueue has no minimum run time (proposed only) but has
ClusterQueue quotas, `borrowWithinCohort.maxPriorityThreshold` and fair sharing;
Kubernetes `terminationGracePeriodSeconds` and ResourceQuota with a PriorityClass
`scopeSelector`. A snippet is text to paste, so values are rendered in the units
each scheduler reads (Slurm times as [days-]hh:mm:ss or minutes, Kubernetes
durations as Go durations).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

# Scheduler names as stored in the suggestions table.
SLURM, KUEUE, KAI, VOLCANO, KUBERNETES = "slurm", "kueue", "kai", "volcano", "kubernetes"


def slurm_time(seconds: float) -> str:
    """Slurm's [days-]hh:mm:ss."""
    total = max(0, math.ceil(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def go_duration(seconds: float) -> str:
    """A Go duration string (`1h30m`, `45s`) as Kubernetes-style APIs parse it."""
    total = max(0, math.ceil(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def min_runtime(seconds: float, qos: tuple[str, ...]) -> dict[str, str]:
    t = slurm_time(seconds)
    qos_lines = "\n".join(f"sacctmgr modify qos {q} set PreemptExemptTime={t}" for q in qos)
    return {
        SLURM: (
            "# slurm.conf: no job may be preempted before it has run this long\n"
            f"PreemptExemptTime={t}\n"
            + (f"# or only for the preemptible QOS:\n{qos_lines}\n" if qos_lines else "")
        ),
        KAI: (
            "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: <queue>\nspec:\n"
            f"  preemptMinRuntime: {go_duration(seconds)}\n  reclaimMinRuntime: {go_duration(seconds)}\n"
            "# or cluster-wide, minruntime plugin arguments:\n"
            f"#   defaultPreemptMinRuntime: {go_duration(seconds)}\n"
            f"#   defaultReclaimMinRuntime: {go_duration(seconds)}\n"
        ),
        VOLCANO: (
            "# enable the cdp plugin in the scheduler configuration, then on each preemptible pod:\n"
            "metadata:\n  annotations:\n"
            f"    volcano.sh/cooldown-time: \"{go_duration(seconds)}\"\n"
        ),
        KUEUE: (
            "# Released Kueue (to v0.19.2) has no minimum run time before preemption, in no feature gate;\n"
            "# the proposals (KEP-8522, KEP-9876) are not in a release. Instead: keep short-lived\n"
            "# preemptible work out of the ClusterQueue that high tiers preempt from, or set\n"
            "# withinClusterQueue: Never for it.\n"
        ),
    }


def kueue_boost(value: int) -> str:
    """A Workload's priority boost, in the one form released Kueue reads (docs/kubernetes.md)."""
    return (
        "# Kueue v0.17.0 and later (to v0.19.2) read the annotation, with the feature gate PriorityBoost\n"
        "# (alpha, off by default: --feature-gates=PriorityBoost=true); no release has a typed field:\n"
        f"kubectl annotate workload <name> kueue.x-k8s.io/priority-boost={value} --overwrite\n"
    )


def slurm_victim_order(version: str) -> dict[str, str]:
    """Slurm's own victim order: by job order (the oldest jobs, which have done the most work, first) unless told
    to take the youngest first (src/slurmctld/preempt.c, `_sort_by_youngest`); PreemptParameters exists from
    23.02, before it the option is SchedulerParameters' preempt_youngest_first."""
    numbers = [int(x) for x in version.split(".")[:2] if x.isdigit()]
    old = len(numbers) == 2 and tuple(numbers) < (23, 2)
    line = ("SchedulerParameters=<your parameters>,preempt_youngest_first" if old
            else "PreemptParameters=youngest_first")
    return {
        SLURM: (
            "# Preempt the youngest jobs first instead of by job order (oldest first), slurm.conf"
            + (f" (Slurm {version}):\n" if version else ":\n") + f"{line}\n"
            + ("" if version else "# (before Slurm 23.02: SchedulerParameters=...,preempt_youngest_first)\n")
            + "# then: scontrol reconfigure\n"
        ),
    }


def for_scheduler(found: Mapping[str, str], scheduler: str | None) -> dict[str, str]:
    """Only the snippets of the scheduler the cluster runs (all of them when it is not known): a Kueue or KAI
    cluster also gets the plain Kubernetes ones (pod specs); a Kubernetes cluster whose scheduler is not known
    gets every Kubernetes scheduler's."""
    if scheduler is None:
        return dict(found)
    wanted = {
        KUBERNETES: {KUEUE, KAI, VOLCANO, KUBERNETES},
        KUEUE: {KUEUE, KUBERNETES}, KAI: {KAI, KUBERNETES}, VOLCANO: {VOLCANO, KUBERNETES},
    }.get(scheduler, {scheduler})
    return {name: text for name, text in found.items() if name in wanted}


def action_snippet(name: str, alone: bool = False, **settings: float) -> str:
    """The preemptlens action that does a change per job from its live cost (docs/figures.md, Actions); `alone`:
    the change itself, not an alternative to a scheduler setting."""
    lines = "".join(f"{key} = {value:g}\n" for key, value in settings.items())
    lead = "Let preemptlens" if alone else "Or let preemptlens"
    return (f"# {lead} do it per job, from its live cost, capped and audited; start in dry-run, then enforce:\n"
            f"[{name}]\nenabled = true\nmode = \"dry-run\"\n{lines}")


def near_completion(share: float, min_left_s: float, qos: tuple[str, ...]) -> dict[str, str]:
    pct = round(100 * share)
    return {
        SLURM: (
            # slurmctld changes a job's QOS only while it is pending (tests/slurm/test_slurm_actions.py).
            "# Slurm moves a job to another QOS only while it is pending, never while it runs. So submit\n"
            f"# the last {100 - pct}% of a job's work (from its checkpoint) as a job of its own in a QOS\n"
            "# that nothing preempts:\n"
            "sacctmgr add qos finishing set Priority=0\n"
            + "".join(f"sacctmgr modify qos {q} set Preempt-=finishing\n" for q in qos)
            + "# sbatch --dependency=afterok:<first part's job id> --qos=finishing <the job, from its checkpoint>\n"
            + "# and let preemptlens protect a victim that was that far along while it waits to restart:\n"
            + action_snippet("slurm_protect", near_completion_high=share)
        ),
        KAI: (
            # KAI's scheduler reads the PodGroup's spec.preemptibility; the kai.scheduler/preemptibility label
            # counts on a pod or its top owner, from which the podgrouper writes that field.
            "# Make the PodGroup non-preemptible once the job reports "
            f">= {pct}% progress:\n"
            "kubectl patch podgroup <name> --type merge -p '{\"spec\":{\"preemptibility\":\"non-preemptible\"}}'\n"
            + action_snippet("kai_protect", near_completion_high=share)
        ),
        VOLCANO: (
            f"# Once the job reports >= {pct}% progress, mark its pods as not preemptable:\n"
            "kubectl annotate pod <pod> volcano.sh/preemptable=false --overwrite\n"
        ),
        KUEUE: (
            f"# Once a Workload reports >= {pct}% progress, raise its priority above the preemptors' "
            "(WorkloadPriorityClass) so that it is no longer a candidate:\n"
            "kubectl patch workload <name> --type merge -p '{\"spec\":{\"priorityClassName\":\"finishing\"}}'\n"
            "# or boost it (500 is the kueue_boost action's default cap):\n"
            + kueue_boost(500)
            + action_snippet("kueue_boost", near_completion_high=share)
        ),
        KUBERNETES: (
            f"# Jobs with less than {go_duration(min_left_s)} left: switch to a PriorityClass with "
            "preemptionPolicy Never and a value above the preemptors'.\n"
        ),
    }


def grace_time(seconds: float, partitions: tuple[str, ...]) -> dict[str, str]:
    t = slurm_time(seconds)
    secs = math.ceil(seconds)
    parts = "\n".join(f"PartitionName={p} GraceTime={secs}" for p in partitions)
    return {
        SLURM: (
            "# SIGTERM at preemption, then the kill GraceTime seconds later: time for a final checkpoint.\n"
            "# slurm.conf (seconds) on the preemptible partitions (preempt/partition_prio):\n"
            f"{parts}\n"
            f"# or per QOS (preempt/qos): sacctmgr modify qos <qos> set GraceTime={t}\n"
            "# PreemptParameters=send_user_signal lets the batch script's trap see the signal too.\n"
            "# slurmctld requeues the job only when its grace time is over: a job that exits on its\n"
            "# own after saving is not requeued. Trap SIGTERM, save, then wait for the kill.\n"
        ),
        KUBERNETES: f"spec:\n  terminationGracePeriodSeconds: {secs}\n",
        KUEUE: f"# pod template of the Job:\nspec:\n  terminationGracePeriodSeconds: {secs}\n",
        KAI: f"# pod template:\nspec:\n  terminationGracePeriodSeconds: {secs}\n",
        VOLCANO: f"# vcjob task template:\nspec:\n  terminationGracePeriodSeconds: {secs}\n",
    }


def checkpoint_interval(team: str, schedule: tuple[tuple[float, float], ...]) -> dict[str, str]:
    """A cadence, or a schedule by the run's age ((from s, every s), ascending from 0), as the job writes it."""
    if len(schedule) == 1:
        seconds = schedule[0][1]
        text = (
            f"# Jobs of {team}: checkpoint every {go_duration(seconds)} ({math.ceil(seconds)} s of training),\n"
            "# e.g. PyTorch Lightning: ModelCheckpoint(train_time_interval=timedelta(seconds="
            f"{math.ceil(seconds)}))\n"
        )
        return {SLURM: text, KUBERNETES: text}
    steps = "\n".join(
        f"#   from {go_duration(start)} of training: every {go_duration(every)}" if start else
        f"#   from the start: every {go_duration(every)}" for start, every in schedule)
    bands = ", ".join(f"({math.ceil(start)}, {math.ceil(every)})" for start, every in schedule)
    text = (
        f"# Jobs of {team}: checkpoint often while a run is young (most preemptions come early), rarely later:\n"
        f"{steps}\n"
        "# e.g. a callback that saves when the seconds since the last save reach the step's interval,\n"
        f"# with SCHEDULE = [{bands}]  # (seconds since the run started, interval seconds)\n"
    )
    return {SLURM: text, KUBERNETES: text}


def tier_limits(team: str, tier_class: str, gpus: int, share_fraction: float) -> dict[str, str]:
    return {
        SLURM: (
            f"# cap {team}'s use of {tier_class} at {gpus} GPUs at a time\n"
            f"sacctmgr add qos {tier_class}-{team}\n"
            f"sacctmgr modify qos {tier_class}-{team} set GrpTRES=gres/gpu={gpus}\n"
            f"sacctmgr modify account {team} set qos+={tier_class}-{team}\n"
            f"# or make it cost more fair-share: sacctmgr modify qos {tier_class} set UsageFactor=2\n"
        ),
        KUEUE: (
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata:\n"
            f"  name: {team}\nspec:\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n"
            f"    flavors:\n    - name: <flavor>\n      resources:\n      - name: nvidia.com/gpu\n"
            f"        nominalQuota: {gpus}\n  preemption:\n    borrowWithinCohort:\n"
            "      policy: LowerPriority\n      maxPriorityThreshold: <value below the high PriorityClass>\n"
        ),
        KUBERNETES: (
            "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n"
            f"  name: {tier_class}-gpus\n  namespace: {team}\nspec:\n  hard:\n"
            f"    requests.nvidia.com/gpu: \"{gpus}\"\n  scopeSelector:\n    matchExpressions:\n"
            f"    - operator: In\n      scopeName: PriorityClass\n      values: [\"{tier_class}\"]\n"
        ),
        KAI: (
            f"# give {team}'s queue a quota of {gpus} GPUs so work above it is reclaimable\n"
            f"apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: {team}\nspec:\n"
            f"  resources:\n    gpu:\n      quota: {gpus}\n      overQuotaWeight: 1\n"
        ),
    }


def idle_reclaim(warn_s: float, release_s: float) -> dict[str, str]:
    warn, release = round(warn_s / 60), round(release_s / 60)
    text = (
        f"# preemptlens alert rule: warn the owner after {warn} min at zero utilisation,\n"
        f"# release the GPUs after {release} min (requeue or cancel the job).\n"
    )
    return {
        SLURM: text + "# release: scontrol requeue <jobid>   (or scancel <jobid> for interactive jobs)\n",
        KUBERNETES: text + "# release: kubectl delete pod <pod>  (or suspend the Kueue Workload)\n",
        KUEUE: text + "# release: kubectl patch workload <name> --type merge -p '{\"spec\":{\"active\":false}}'\n",
    }


def repeat_victims(boost: int, half_life_s: float) -> dict[str, str]:
    return {
        SLURM: (
            "# Requeued victims keep their place: raise the priority of requeued jobs,\n"
            f"# e.g. in a job_submit/priority plugin or by hand: scontrol update jobid=<id> nice=-{boost}\n"
            "# and count fair-share usage with a half-life so one heavy week does not starve a team:\n"
            f"PriorityDecayHalfLife={slurm_time(half_life_s)}\n"
            "# preemptlens can move a costly victim, while it waits to restart, to a QOS nothing preempts:\n"
            + action_snippet("slurm_protect")
        ),
        KUEUE: (
            "# fair sharing between the ClusterQueues of a cohort, preempting the most over-share first\n"
            "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n"
            "# and per ClusterQueue: spec.fairSharing.weight: \"1\"\n"
            + "# boost a victim that keeps losing its place:\n"
            + kueue_boost(boost)
            + action_snippet("kueue_boost", max_boost=boost)
            + "# Released Kueue (to v0.19.2) has no backoff before borrowing again and no cap on how often\n"
            "# one Workload is preempted: both are proposals (KEP-14468, KEP-13396), in no release.\n"
        ),
        KAI: (
            "# time-based fairshare: usage decays, so queues that were preempted get ahead again\n"
            "usageDBConfig:\n  usageParams:\n"
            f"    windowSize: {go_duration(4 * half_life_s)}\n    windowType: sliding\n"
            f"    halfLifePeriod: {go_duration(half_life_s)}\n"
        ),
    }


def quotas() -> dict[str, str]:
    """Per-team GPU quotas and pools with their own guarantees: the article's first step, before preemption."""
    return {
        SLURM: (
            "# a GPU limit per team (account), and a partition per pool tier\n"
            "sacctmgr modify account <team> set GrpTRES=gres/gpu=<GPUs>\n"
            "# slurm.conf: a reserved pool for time-sensitive work beside the shared one\n"
            "PartitionName=reserved Nodes=<nodes> PriorityTier=2 AllowQos=<time-sensitive QOS>\n"
            "PartitionName=shared Nodes=<nodes> PriorityTier=1 Default=YES\n"
        ),
        KUEUE: (
            "# one ClusterQueue per team with its GPU quota, sharing unused quota in a cohort\n"
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata:\n  name: <team>\nspec:\n"
            "  cohort: <cohort>\n  namespaceSelector: {}\n  resourceGroups:\n"
            "  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: <flavor>\n      resources:\n"
            "      - name: nvidia.com/gpu\n        nominalQuota: <GPUs>\n"
        ),
        KAI: (
            "# one queue per team with its guaranteed GPUs and a limit\n"
            "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: <team>\nspec:\n"
            "  parentQueue: <department>\n  resources:\n    gpu:\n      quota: <GPUs>\n      limit: <GPUs>\n"
            "      overQuotaWeight: 1\n"
        ),
        KUBERNETES: (
            "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpus\n  namespace: <team>\nspec:\n"
            "  hard:\n    requests.nvidia.com/gpu: \"<GPUs>\"\n"
        ),
    }


def tier_cap() -> dict[str, str]:
    """A cap on the GPUs the critical and high tiers may hold, per team, before their share grows further."""
    return {
        SLURM: "sacctmgr modify qos <high QOS> set GrpTRES=gres/gpu=<GPUs>\n"
               "# or per team: a QOS high-<team> with its own GrpTRES=gres/gpu=<GPUs>\n",
        KUBERNETES: (
            "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: high-gpus\n  namespace: <team>\nspec:\n"
            "  hard:\n    requests.nvidia.com/gpu: \"<GPUs>\"\n  scopeSelector:\n    matchExpressions:\n"
            "    - operator: In\n      scopeName: PriorityClass\n      values: [\"<high PriorityClass>\"]\n"
        ),
    }


def protect(action: str, high_gpu_s: float, low_gpu_s: float) -> dict[str, str]:
    """preemptlens's action for one scheduler (analytics/actions.py), holding jobs back from a live cost: what the
    scheduler needs for it, then the action's settings. No scheduler weighs what a victim would lose itself."""
    marks = {"cost_high_gpu_s": high_gpu_s, "cost_low_gpu_s": low_gpu_s}
    if action == "slurm_protect":
        return {SLURM: (
            "# preempt/qos: a QOS that no QOS's Preempt list names ([slurm_actions] protected_qos); slurmctld\n"
            "# changes a job's QOS only while it is pending, so the action holds a victim waiting to restart\n"
            "sacctmgr add qos protected\n" + action_snippet(action, alone=True, **marks))}
    if action == "kueue_boost":
        return {KUEUE: kueue_boost(100) + action_snippet(action, alone=True, **marks)}
    return {KAI: ("# the action patches the PodGroup's spec.preemptibility to non-preemptible while it holds it\n"
                  + action_snippet(action, alone=True, **marks))}


def published_rules() -> dict[str, str]:
    """Rules victims can see: who may preempt whom and why, and a notice to each victim."""
    notice = (
        "# preemptlens: a notice to each victim team (what happened, who preempted it, when to expect a restart)\n"
        "[alerts]\nrules = [\"victim_notice\"]\n# and per team: alerts.team_webhooks.<team> = { \"$env\" = \"...\" }\n"
    )
    return {
        SLURM: (
            "# record who preempted whom: keep the slurmctld log that names the preemptor and let\n"
            "# `preemptlens collect slurm` read it; publish PreemptType, PreemptMode and the partitions'\n"
            "# PriorityTier where users read the cluster's rules\n" + notice
        ),
        KUBERNETES: (
            "# publish the PriorityClasses and who may preempt whom; keep the scheduler's Preempted events\n"
            "# (or Kueue's Workload conditions) long enough for `preemptlens collect kubernetes`\n" + notice
        ),
    }


def not_yet(fix_first: str) -> dict[str, str]:
    text = (
        "# No scheduler change: do not rely on preemption yet.\n"
        f"# Fix first: {fix_first}.\n"
    )
    return {SLURM: text, KUBERNETES: text}
