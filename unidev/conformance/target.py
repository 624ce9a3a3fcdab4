"""The plugin under test: its record, library, raw table and the settings the run honours."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..contract import opset
from ..contract.spec import Conformance
from ..core import discovery
from . import abi, cases

__all__ = ["Target", "GROUPS", "resolve"]

GROUPS = ("contract", "memory", "streams", "kernels", "layouts", "bad_inputs", "framework")


@dataclass
class Target:
    """What one conformance run proves: plugin `name`, device `index`, up to op tier `tier`."""

    device: str  # "name" or "name:index" as given
    name: str
    index: int
    record: discovery.PluginRecord
    tier: int
    only_ops: set[str] | None = None
    groups: tuple[str, ...] = GROUPS
    notes: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.record.status == discovery.OK

    @property
    def conformance(self) -> Conformance:
        spec = self.record.spec
        return spec.conformance if spec is not None else Conformance()

    @property
    def library(self):
        return self.record.library

    @functools.cached_property
    def api(self) -> abi.Api:
        return abi.Api(self.library.api_address)

    def ops(self) -> list[opset.OpSchema]:
        """Ops this run covers: tiers up to `tier`, limited by --unidev-ops."""
        return [op for op in opset.OPS.values()
                if op.tier <= self.tier and (not self.only_ops or op.name in self.only_ops)]

    def exclusion(self, op: str, dtype: str | None = None) -> str | None:
        ex = self.conformance.exclusions
        return (ex.get(f"{op}:{dtype}") if dtype else None) or ex.get(op)

    def tolerances(self) -> dict:
        return dict(self.conformance.tolerances)

    def tolerance_table(self) -> dict[str, dict[str, dict]]:
        """Per op class and dtype: the suite's cap, the plugin's setting and what is used."""
        out: dict[str, dict[str, dict]] = {}
        tol = self.tolerances()
        for cls, caps in cases.TOLERANCE_CAPS.items():
            for dtype, cap in caps.items():
                mine = tol.get(dtype)
                used = (min(mine[0], cap[0]), min(mine[1], cap[1])) if mine else cap
                note = ""
                if mine and (mine[0] > cap[0] or mine[1] > cap[1]):
                    note = "plugin asked for looser than the cap; cap used"
                elif mine:
                    note = "tightened by the plugin"
                out.setdefault(cls, {})[dtype] = {"cap": list(cap), "plugin": list(mine)
                                                  if mine else None, "used": list(used),
                                                  "note": note}
        return out


def resolve(device: str, tier: int | None = None, ops: str | None = None,
            groups: str | None = None) -> Target:
    """The Target for a --unidev-device value; PluginLoadError if no such plugin exists."""
    name, _, idx = device.partition(":")
    rec = discovery.get(name)
    claimed = rec.spec.conformance.tier if rec.spec is not None else 0
    only = {o.strip() for o in ops.split(",") if o.strip()} if ops else None
    if only:
        unknown = sorted(only - set(opset.OPS))
        if unknown:
            raise ValueError(f"--unidev-ops: unknown op(s) {unknown}")
    chosen = GROUPS
    if groups:
        chosen = tuple(g.strip().replace("-", "_") for g in groups.split(",") if g.strip())
        bad = sorted(set(chosen) - set(GROUPS))
        if bad:
            raise ValueError(f"--unidev-groups: unknown group(s) {bad}; expected some of "
                             f"{list(GROUPS)}")
    return Target(device=device, name=name, index=int(idx) if idx else 0, record=rec,
                  tier=claimed if tier is None else tier, only_ops=only, groups=chosen)
