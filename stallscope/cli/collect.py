"""``stallscope collect [--out DIR] -- COMMAND...``: run a job and leave a complete trace bundle."""

from __future__ import annotations

import sys

import click


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "out", metavar="DIR", default=None,
              help="Bundle directory (default: $STALLSCOPE_BUNDLE, else ./stallscope-bundle-<UTC time>).")
@click.option("--no-topology", is_flag=True, help="Do not probe this host's topology (nvidia-smi, lscpu, NUMA, InfiniBand).")
@click.option("--no-nccl-debug", is_flag=True, help="Do not set NCCL_DEBUG/NCCL_DEBUG_SUBSYS/NCCL_DEBUG_FILE.")
@click.option("--quiet", "-q", is_flag=True, default=False, help="No summary line at the end.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def collect(out: str | None, no_topology: bool, no_nccl_debug: bool, quiet: bool,
            command: tuple[str, ...]) -> None:
    """Run COMMAND (torchrun, srun, mpirun, python, ...) so that it leaves a complete bundle.

    The command runs with your terminal and gets STALLSCOPE_BUNDLE=<bundle> (where
    stallscope.collectors.profile writes each rank's trace) and NCCL_DEBUG=INFO,
    NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV, NCCL_DEBUG_FILE=<bundle>/nccl/%h.%p.log unless you set
    them yourself. manifest.json records the command, start/end, exit code, ranks -> hosts/pids/
    devices, versions, the NCCL/CUDA environment (secrets masked) and this host's topology.

    Exit code: the command's (128+N if killed by signal N; 127 command not found), so CI sees a
    failed training run; the manifest is written in every case. Put `--` before the command.

    Example: stallscope collect --out run-42 -- torchrun --nproc_per_node=8 train.py
    """
    from stallscope.collectors.launch import run_collect
    from stallscope.errors import UsageError

    if not command:
        raise UsageError("collect: no command given (usage: stallscope collect [--out DIR] -- COMMAND...)")
    res = run_collect(list(command), out=out, topology=not no_topology, nccl_debug=not no_nccl_debug)
    if not quiet:
        for note in res.notes:
            click.echo(f"stallscope collect: note: {note}", err=True)
        click.echo(f"stallscope collect: {res.status} (exit code {res.exit_code}); bundle {res.bundle}: "
                   f"{res.ranks} rank record(s), {res.traces} trace(s), {res.nccl_logs} NCCL log(s)", err=True)
    if res.exit_code:
        sys.exit(res.exit_code)  # the command's code, so CI sees the failed run
