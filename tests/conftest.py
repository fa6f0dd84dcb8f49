import os
import shutil

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch as th

th.set_num_threads(1)


@pytest.fixture
def user_error(capsys):
    """Run ``sb3-ppo-ext`` on an argument list it must refuse; return the one line it ends with (on stderr, exit
    status 2, no traceback)."""

    def run(argv: list[str]) -> str:
        from sb3_ppo_ext.cli import main

        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return err.strip().splitlines()[-1]

    return run


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test (training commands run in this process), as rl-zoo3's --num-threads 1."""
    threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(threads)


@pytest.fixture
def refused_within():
    """Run ``call()``, which must raise ``error`` (a type); return the error, the CPU seconds it took (this process's,
    so that other load on a shared machine does not count) and how far it raised the process's peak memory (bytes,
    from ``resource.getrusage``): what a refused resource bomb must keep small."""
    import resource
    import time

    def run(call, error: type[BaseException] = ValueError) -> tuple[BaseException, float, int]:
        peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.process_time()
        with pytest.raises(error) as raised:
            call()
        seconds = time.process_time() - started
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) * 1024  # ru_maxrss: KiB on Linux
        return raised.value, seconds, grown

    return run


@pytest.fixture
def shipped_agent_copy(tmp_path):
    """A copy of the shipped Pendulum-v1 agent folder, to edit (tests of tampered or damaged agent files)."""
    from sb3_ppo_ext.pretrained import read_agent

    source, _ = read_agent("Pendulum-v1")
    folder = tmp_path / "agent"
    shutil.copytree(source, folder)
    return folder
