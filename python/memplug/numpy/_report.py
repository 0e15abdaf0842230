"""The report ``python -m memplug.numpy`` gives at exit: one dict, printed as
a table or written as JSON."""

from __future__ import annotations

from typing import Any, Dict, List

import memplug


def build(name: str, exit_status: int, all_threads: bool) -> Dict[str, Any]:
    """The report for handler ``name`` after the program ended with
    ``exit_status``."""
    s = memplug.stats(name)
    bridge = s["bridge"] or {}
    return {
        "handler": name,
        "numpy_name": bridge.get("numpy_name", f"memplug:{name}"),
        "info": s["handler"],
        "exit_status": exit_status,
        "all_threads": all_threads,
        "bridge": s["bridge"],
        "plugin": s["plugin"],
    }


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _sites(title: str, total: int, sites: List[Dict[str, Any]], sizes: bool) -> List[str]:
    lines = [f"  {title}: {total}"]
    for site in sites[:20]:
        where = site["file"] if site["line"] == 0 else f"{site['file']}:{site['line']}"
        func = f" in {site['function']}" if site["function"] else ""
        extra = f" (allocated {site['allocated']}, NumPy passed {site['passed']})" if sizes else ""
        lines.append(f"    {site['count']:>6}x  {where}{func}{extra}")
        for caller in site.get("callers", [])[:4]:
            lines.append(f"             called from {caller}")
    if len(sites) > 20:
        lines.append(f"    ... and {len(sites) - 20} more places")
    return lines


def format_text(report: Dict[str, Any]) -> str:
    """The report as lines for a terminal."""
    info = report["info"]
    out = [
        f"memplug.numpy: handler {report['handler']} (NumPy sees {report['numpy_name']}): "
        f"{info['name']} {info['version']}, ABI {info['abi']}, "
        f"{'thread-safe' if info['thread_safe'] else 'not thread-safe (locked)'}, from {info['source']}"
    ]
    b = report["bridge"]
    if b is None:
        out.append("  NumPy allocated nothing through it")
    else:
        out.append(
            f"  blocks: {b['allocations']} allocated, {b['frees']} freed, {b['live_blocks']} live, "
            f"{b['reallocs']} reallocs, {b['null_frees']} free(NULL) filtered"
        )
        out.append(
            f"  bytes:  {_bytes(b['bytes_allocated'])} allocated, {_bytes(b['live_bytes'])} live, "
            f"peak {_bytes(b['peak_bytes'])}"
        )
        if b.get("cache") == "never":
            out.append(f"  cache of freed blocks: never ({b['cache_refusal']})")
        elif b.get("cache"):
            out.append(
                f"  cache of freed blocks: {b['cache']}, {b['cached_blocks']} blocks "
                f"({_bytes(b['cached_bytes'])}) held for reuse (the plugin counts them live)"
            )
    p = report["plugin"]
    if p is None:
        out.append("  plugin: reports no statistics")
    else:
        out.append(
            f"  plugin: {p['live_count']} blocks / {_bytes(p['live_bytes'])} live, peak {_bytes(p['peak_bytes'])}, "
            f"{p['total_allocations']} allocations, bad_frees {p['bad_frees']}, "
            f"size_mismatches {p['size_mismatches']}"
        )
    if b is not None:
        out += _sites("NumPy size mismatches", b["numpy_size_mismatches"], b["numpy_size_mismatch_sites"], True)
        if b["foreign_pointers"]:
            out += _sites(
                "foreign pointers (not made by this handler; ignored)",
                b["foreign_pointers"],
                b["foreign_pointer_sites"],
                False,
            )
    out.append(f"  exit status: {report['exit_status']}")
    return "\n".join(out)
