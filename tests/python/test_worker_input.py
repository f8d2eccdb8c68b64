"""A Python worker refuses what it cannot use, before anything reaches the
cluster, and says what to change: cluster flags, token files, gradients and
metrics that do not fit the declared model."""

import argparse
import os
import tempfile
import unittest

import numpy as np

import parasync
from parasync import cluster as cluster_module


def parse(argv, environ=None):
    parser = cluster_module.add_arguments(argparse.ArgumentParser())
    return cluster_module.from_arguments(parser.parse_args(argv), environ or {})


HOSTS = ["--ps_hosts=127.0.0.1:2222", "--worker_hosts=127.0.0.1:2223,127.0.0.1:2224"]


class ClusterFlagsTest(unittest.TestCase):
    def test_the_flags_tf_config_and_a_cluster_file_name_the_same_cluster(self):
        by_flags = parse(HOSTS + ["--job_name=worker", "--task_index=1"])
        tf_config = ('{"cluster": {"ps": ["127.0.0.1:2222"], "chief": ["127.0.0.1:2223"], '
                     '"worker": ["127.0.0.1:2224"]}, "task": {"type": "worker", "index": 0}}')
        by_tf_config = parse([], {"TF_CONFIG": tf_config})
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"cluster": {"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]}, '
                    '"training": {"mode": "sync"}}')
        self.addCleanup(os.unlink, f.name)
        by_file = parse([f"--cluster_file={f.name}", "--task_index=1"])
        for config in (by_flags, by_tf_config, by_file):
            self.assertEqual((config.ps, config.workers, config.task_index),
                             (["127.0.0.1:2222"], ["127.0.0.1:2223", "127.0.0.1:2224"], 1))

    def test_backups_come_from_the_flag_a_cluster_file_or_tf_config(self):
        by_flag = parse(HOSTS + ["--task_index=0", "--ps_backup_hosts=127.0.0.1:2232"])
        tf_config = ('{"cluster": {"ps": ["127.0.0.1:2222"], "ps_backup": ["127.0.0.1:2232"], '
                     '"worker": ["127.0.0.1:2223"]}, "task": {"type": "worker", "index": 0}}')
        by_tf_config = parse([], {"TF_CONFIG": tf_config})
        for config in (by_flag, by_tf_config):
            self.assertEqual(config.ps_backups, ["127.0.0.1:2232"])
            self.assertEqual(config.ps_pair(0), ["127.0.0.1:2222", "127.0.0.1:2232"])
        self.assertEqual(parse(HOSTS + ["--task_index=0"]).ps_pair(0), ["127.0.0.1:2222"])

    def test_bad_clusters_are_refused_with_what_to_change(self):
        cases = [
            ([], "no cluster given"),
            (["--ps_hosts=127.0.0.1:2222"], "give both --ps_hosts and --worker_hosts"),
            (["--ps_hosts=127.0.0.1", "--worker_hosts=127.0.0.1:2223"], "is not host:port"),
            (HOSTS + ["--job_name=ps"], "a Python task is a worker"),
            (HOSTS + ["--task_index=2"], "worker:2 does not exist"),
            (HOSTS + ["--task_index=0", "--tls_cert=c.pem"], "TLS needs --tls_ca"),
            (HOSTS + ["--task_index=0", "--ps_backup_hosts=127.0.0.1:2232,127.0.0.1:2233"],
             r"lists 2 backup\(s\) for 1 ps task\(s\): give one backup per ps task"),
            (HOSTS + ["--task_index=0", "--ps_backup_hosts=127.0.0.1:2223"], "address 127.0.0.1:2223 is also"),
        ]
        for argv, message in cases:
            with self.subTest(argv=argv):
                with self.assertRaisesRegex(parasync.ClusterError, message):
                    parse(argv)

    def test_a_token_file_others_can_read_is_refused(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("0123456789abcdef0123456789abcdef\n")
        self.addCleanup(os.unlink, f.name)
        os.chmod(f.name, 0o644)
        with self.assertRaisesRegex(parasync.ClusterError, f"chmod 600 {f.name}"):
            parse(HOSTS + ["--task_index=0", f"--cluster_token_file={f.name}"])
        os.chmod(f.name, 0o600)
        self.assertEqual(parse(HOSTS + ["--task_index=0", f"--cluster_token_file={f.name}"]).token,
                         "0123456789abcdef0123456789abcdef")


class StepInputTest(unittest.TestCase):
    """Checked before anything is sent: this worker never joins."""

    def setUp(self):
        cluster = parasync.ClusterConfig(ps=["127.0.0.1:1"], workers=["127.0.0.1:2"], task_index=0)
        signature = parasync.Signature(model="m", variables=[parasync.VariableSpec("W", (3, 2)),
                                                             parasync.VariableSpec("b", (2,))],
                                       metric_names=("heldout_accuracy",))
        self.worker = parasync.Worker(cluster, signature, log=lambda line: None, serve_control=False)
        self.addCleanup(self.worker.close)
        self.good = {"W": np.zeros((3, 2)), "b": np.zeros(2)}

    def test_a_step_before_joining_is_refused(self):
        with self.assertRaisesRegex(RuntimeError, r"worker:0 has not joined the cluster: call join\(\) first"):
            self.worker.push(self.good, 0.5)

    def test_gradients_that_do_not_fit_the_model_are_refused_by_name(self):
        # Six values, as W has, but transposed: refused for its shape.
        with self.assertRaisesRegex(ValueError, r"'W' has shape \(2, 3\), the variable \(3, 2\)"):
            self.worker.push({"W": np.zeros((2, 3)), "b": np.zeros(2)}, 0.5)
        with self.assertRaisesRegex(ValueError, "no gradient for variable 'b'"):
            self.worker.push({"W": np.zeros((3, 2))}, 0.5)
        with self.assertRaisesRegex(ValueError, r"the model does not declare: \['c'\]"):
            self.worker.push(dict(self.good, c=np.zeros(1)), 0.5)

    def test_metrics_the_signature_does_not_declare_are_refused(self):
        with self.assertRaisesRegex(ValueError, r"metrics \['accuracy'\] are not declared"):
            self.worker.push(self.good, 0.5, metrics={"accuracy": 0.9})


if __name__ == "__main__":
    unittest.main()
