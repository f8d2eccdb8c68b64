"""The package as pip installs it: `pip install --no-index
--no-build-isolation <checkout>/python` into a virtual environment over
Debian's Python (--system-site-packages: grpcio, protobuf, NumPy and
setuptools are Debian's, nothing is downloaded). Outside the checkout and
without PYTHONPATH, the venv's python imports the installed package -- not
the source or the build tree -- with its generated protocol modules and its
py.typed, and trains a NumPy model as the chief of a real parasync-node ps."""

import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

import node_cluster
from node_cluster import Cluster, describe, read_metrics

CHECKOUT = os.path.realpath(os.path.join(node_cluster.HERE, "..", ".."))
PACKAGE_SOURCE = os.path.join(CHECKOUT, "python")
DEBIAN_PYTHON = "/usr/bin/python3"

# What a user's program sees of the installed package.
IMPORTS = """
import json, os, sys
import parasync
from parasync.proto import parasync_pb2, parasync_pb2_grpc, tensorboard_pb2
package = os.path.dirname(parasync.__file__)
print(json.dumps({"prefix": sys.prefix, "version": parasync.__version__,
                  "files": [m.__file__ for m in (parasync, parasync_pb2, parasync_pb2_grpc, tensorboard_pb2)],
                  "py_typed": os.path.isfile(os.path.join(package, "py.typed")),
                  "stubs": sorted(f for f in os.listdir(os.path.join(package, "proto")) if f.endswith(".pyi"))}))
"""

# A program that configures logging gets the worker's lines as records of
# "parasync.worker", and nothing on stderr besides. A variable split over two
# ps tasks makes the worker say so as it starts, before it connects anywhere.
LOGGING = """
import json, logging
import parasync
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelname, record.getMessage()])
logging.basicConfig(level=logging.INFO, handlers=[Keep()])
cluster = parasync.ClusterConfig(ps=["127.0.0.1:1", "127.0.0.1:2"], workers=["127.0.0.1:3"], task_index=0,
                                 min_slice_bytes=1024)
signature = parasync.Signature(model="m", variables=[parasync.VariableSpec("W", (64, 10))])
parasync.Worker(cluster, signature, serve_control=False).close()
print(json.dumps(records))
"""

# A chief of a model of its own, through the installed package's public
# API: the digits' softmax, declared, initialised and trained by NumPy.
CHIEF = """
import argparse, os
import numpy as np
import parasync
from parasync import models

parser = argparse.ArgumentParser()
parser.add_argument("--dataset", required=True)
cluster, args = parasync.parse_cluster(parser=parser)
features, targets = models.read_csv(args.dataset)
x, labels = features / 16.0, targets.astype(np.int64)
signature = parasync.Signature(model="pip-digits-softmax", variables=[
    parasync.VariableSpec("W", (x.shape[1], 10)), parasync.VariableSpec("b", (10,))])
rng = np.random.default_rng(7)
print("parasync from", os.path.realpath(parasync.__file__), flush=True)
with parasync.Worker(cluster, signature) as worker:
    worker.initialize({"W": np.zeros((x.shape[1], 10), np.float32), "b": np.zeros(10, np.float32)})
    params = worker.join()
    while not worker.done:
        batch = rng.choice(len(x), size=50, replace=False)
        loss, grads = models.softmax_loss_and_gradient(params, x[batch], labels[batch])
        params = worker.push(grads, loss).parameters
print(f"accuracy {models.softmax_accuracy(params, x, labels):.4f}", flush=True)
"""


def _files_below(directory):
    return {os.path.relpath(os.path.join(folder, name), directory)
            for folder, folders, names in os.walk(directory) for name in folders + names}


def _user_environment():
    """This environment as a user's shell has it: no PYTHONPATH (ctest sets
    one to the build tree), and no pip settings of this machine's (a find-
    links folder, an index): the install may use what is installed only."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    environment.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return environment


class PipInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="parasync-pip-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
        cls.venv = os.path.join(cls.dir, "venv")
        cls.python = os.path.join(cls.venv, "bin", "python")
        cls.elsewhere = os.path.join(cls.dir, "elsewhere")  # a working directory outside both trees
        os.mkdir(cls.elsewhere)
        before = _files_below(PACKAGE_SOURCE)
        for command in ([DEBIAN_PYTHON, "-m", "venv", "--system-site-packages", cls.venv],
                        [cls.python, "-m", "pip", "install", "--no-index", "--no-build-isolation", PACKAGE_SOURCE]):
            done = subprocess.run(command, cwd=cls.elsewhere, env=_user_environment(), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=240)
            if done.returncode != 0:
                raise AssertionError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}")
        cls.left_in_checkout = _files_below(PACKAGE_SOURCE) - before

    def test_the_venv_imports_the_installed_package_with_its_protocol_modules_and_py_typed(self):
        done = subprocess.run([self.python, "-c", IMPORTS], cwd=self.elsewhere, env=_user_environment(),
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        seen = json.loads(done.stdout)
        self.assertEqual(os.path.realpath(seen["prefix"]), os.path.realpath(self.venv))
        site = os.path.realpath(self.venv) + os.sep
        for path in seen["files"]:
            self.assertTrue(os.path.realpath(path).startswith(site), f"{path} is not in the venv {self.venv}")
            self.assertFalse(os.path.realpath(path).startswith(CHECKOUT + os.sep), path)
        self.assertTrue(seen["py_typed"], "py.typed is not installed: type checkers would ignore the hints")
        self.assertEqual(seen["stubs"], ["parasync_pb2.pyi", "tensorboard_pb2.pyi"])
        with open(os.path.join(CHECKOUT, "CMakeLists.txt")) as f:
            self.assertIn(f"project(Parasync VERSION {seen['version']} ", f.read())

    def test_a_program_that_configures_logging_gets_the_workers_lines_as_records(self):
        done = subprocess.run([self.python, "-c", LOGGING], cwd=self.elsewhere, env=_user_environment(),
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout), [
            ["parasync.worker", "INFO", "worker:0: variables partitioned (--min_slice_bytes=1024): ps:0 holds W rows "
                                        "0-31 of 64 (1.2 KiB); ps:1 holds W rows 32-63 of 64 (1.2 KiB)"]])
        self.assertEqual(done.stderr, "")

    def test_installing_leaves_the_checkout_as_it_was(self):
        # setuptools' build/ and parasync.egg-info/, the generated modules:
        # all in the build's scratch folder, none in python/.
        self.assertEqual(self.left_in_checkout, set())

    def test_the_installed_package_trains_a_numpy_chief_against_a_parasync_node_ps(self):
        # Every process of the cluster runs as a user starts it: no PYTHONPATH.
        environment = mock.patch.dict(os.environ)
        environment.start()
        self.addCleanup(environment.stop)
        os.environ.pop("PYTHONPATH", None)
        last_step = 300
        cluster = Cluster(self, num_ps=1, num_workers=1)
        logdir = os.path.join(cluster.dir, "run")
        script = os.path.join(cluster.dir, "chief.py")
        with open(script, "w") as f:
            f.write(CHIEF)
        cluster.start_node("ps", 0, "--learning_rate=0.5", f"--last_step={last_step}", "--mode=async",
                           f"--logdir={logdir}")
        cluster._start("worker:0", [self.python, script, *cluster.cluster_flags("worker", 0),
                                    f"--dataset={node_cluster.digits_csv(cluster.dir)}"])
        self.assertEqual(cluster.wait("worker:0"), 0, describe(cluster))
        self.assertEqual(cluster.wait("ps:0"), 0, describe(cluster))
        output = cluster.output("worker:0")
        self.assertIn(f"parasync from {os.path.realpath(self.venv)}/", output)
        # Its state lines reach stderr as parasync-node's do, though the
        # script configured no logging: the app follows a worker by them.
        self.assertRegex(output, rf"\d\d:\d\d:\d\d\.\d{{3}} worker:0 state finished: global step {last_step} ")
        rows = read_metrics(logdir)
        self.assertEqual(max(int(r["global_step"]) for r in rows), last_step)
        # It learnt: from the zeros it started from, which lose ln 10 = 2.30
        # on ten classes, to under a quarter of that (the median of the last 20 batches).
        losses = [float(r["loss"]) for r in sorted(rows, key=lambda r: int(r["global_step"]))]
        self.assertAlmostEqual(losses[0], math.log(10), places=5)
        self.assertLess(sorted(losses[-20:])[10], math.log(10) / 4, (losses[-20:], describe(cluster)))


if __name__ == "__main__":
    unittest.main()
