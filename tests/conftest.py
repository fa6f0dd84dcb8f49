import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch as th  # noqa: E402

th.set_num_threads(1)
