"""The CPU frequency governor of every CPU (``scaling_governor`` under cpufreq), one of the
governors the kernel offers (``scaling_available_governors``); the snapshot keeps each
CPU's own, so a mixed setting comes back mixed."""

from __future__ import annotations

import glob
import os
import re

from beoperf import errors
from beoperf.audit.base import quoted
from beoperf.factors.base import (
    WORD,
    Context,
    Factor,
    FactorError,
    Level,
    machine_wide,
    proc_path,
    read_text,
    saved_text,
    write_text,
)
from beoperf.model.document import JsonObject, JsonValue

CPUFREQ = "/sys/devices/system/cpu/{cpu}/cpufreq/{name}"
CPU = re.compile(r"cpu\d{1,5}")


def cpu_file(ctx: Context, cpu: str, name: str) -> str:
    return proc_path(ctx, CPUFREQ.format(cpu=cpu, name=name))


class Governor(Factor):
    name = "governor"
    order = 2
    summary = "the cpufreq governor of every CPU (performance, powersave ...)"

    def level(self, text: str) -> Level:
        value = text.strip()
        if not WORD.fullmatch(value):
            raise errors.BadSpec(f"governor: {quoted(text)} is not a governor's name")
        return Level(value, value)  # whether the kernel offers it: checked where it is set

    def cpus(self, ctx: Context) -> list[str]:
        """The CPUs with a cpufreq governor; FactorError when there are none, or when
        this is a lab host (the governor is the machine's)."""
        machine_wide(ctx, "governor")
        found = sorted(os.path.basename(os.path.dirname(os.path.dirname(p))) for p in
                       glob.glob(cpu_file(ctx, "cpu[0-9]*", "scaling_governor")))
        cpus = [c for c in found if CPU.fullmatch(c)]
        if not cpus:
            raise FactorError("governor: no cpufreq here (no scaling_governor in sysfs: a "
                              "virtual machine, or no cpufreq driver)")
        return cpus

    def read(self, ctx: Context) -> JsonValue:
        return {cpu: read_text(cpu_file(ctx, cpu, "scaling_governor")) for cpu in self.cpus(ctx)}

    def snapshot(self, ctx: Context) -> JsonObject:
        return {"values": self.read(ctx)}

    def saved_values(self, saved: JsonObject) -> dict[str, str]:
        values = saved.get("values")
        if set(saved) != {"values"} or not isinstance(values, dict):
            raise FactorError("governor: a snapshot holds 'values' only")
        for cpu in values:
            if not CPU.fullmatch(cpu) or not WORD.fullmatch(saved_text(values, cpu)):
                raise FactorError(f"governor: saved {quoted(cpu)}: {quoted(values[cpu])} is "
                                  "not a CPU's governor")
        return {cpu: saved_text(values, cpu) for cpu in values}

    def check_saved(self, saved: JsonObject) -> None:
        self.saved_values(saved)

    def put(self, ctx: Context, cpu: str, governor: str) -> None:
        offered = read_text(cpu_file(ctx, cpu, "scaling_available_governors")).split()
        if governor not in offered:
            raise FactorError(f"governor: {cpu} does not offer {quoted(governor)} (it offers "
                              f"{', '.join(offered)})")
        write_text(cpu_file(ctx, cpu, "scaling_governor"), governor)
        got = read_text(cpu_file(ctx, cpu, "scaling_governor"))
        if got != governor:
            raise FactorError(f"governor: {cpu}: set {governor!r} but read back {got!r}")

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        if level.value is None:
            raise FactorError("governor: the default level is restored, not applied")
        for cpu in self.cpus(ctx):
            self.put(ctx, cpu, level.value)
        return {"read_back": level.value}

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        machine_wide(ctx, "governor")
        for cpu, governor in self.saved_values(saved).items():
            if read_text(cpu_file(ctx, cpu, "scaling_governor")) != governor:
                self.put(ctx, cpu, governor)

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        return ("beoperf-governor.txt", f"cpupower frequency-set -g {level.value}\n# or the "
                f"kernel command line cpufreq.default_governor={level.value}\n")
