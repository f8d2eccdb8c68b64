"""A Python worker's boolean flags take the forms parasync-node's take
(TensorFlow's): --name, --noname, --name=true|false|1|0; any other word exits
2 naming them, so that one command line serves both kinds of task."""

import argparse
import contextlib
import io
import os
import subprocess
import sys
import unittest

from parasync import cluster as cluster_module

HOSTS = ["--ps_hosts=127.0.0.1:2222", "--worker_hosts=127.0.0.1:2223", "--task_index=0"]


def parser():
    return cluster_module.add_arguments(argparse.ArgumentParser(prog="worker.py"))


def refused(argv):
    """The exit code and the message of a parser that refuses argv."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        with unittest.TestCase().assertRaises(SystemExit) as exited:
            parser().parse_args(argv)
    return exited.exception.code, stderr.getvalue()


class BooleanFormsTest(unittest.TestCase):
    def test_every_form_tensorflow_takes_sets_the_data_link(self):
        for argv, expected in [([], True), (["--data_link"], True), (["--nodata_link"], False),
                               (["--data_link=true"], True), (["--data_link=1"], True),
                               (["--data_link=false"], False), (["--data_link=0"], False),
                               # The last one given wins, as with every flag.
                               (["--nodata_link", "--data_link"], True),
                               (["--data_link=1", "--nodata_link"], False)]:
            with self.subTest(argv=argv):
                args = parser().parse_args(HOSTS + argv)
                self.assertIs(args.data_link, expected)
                self.assertIs(cluster_module.from_arguments(args, {}).data_link, expected)

    def test_another_word_exits_2_naming_the_forms(self):
        for word in ["maybe", "yes", "True", "2", ""]:
            with self.subTest(word=word):
                code, message = refused([f"--data_link={word}"])
                self.assertEqual(code, 2)
                self.assertIn(f"--data_link={word}: must be 1 or 0, or true or false "
                              "(or give --data_link or --nodata_link)", message)

    def test_the_negated_form_takes_no_value(self):
        code, message = refused(["--nodata_link=1"])
        self.assertEqual(code, 2)
        self.assertIn("--nodata_link=1: --nodata_link takes no value; give --nodata_link or --data_link=false", message)

    def test_help_lists_the_flag_once_and_says_how_to_turn_it_off(self):
        text = " ".join(parser().format_help().split())
        self.assertIn("--data_link [true|false]", text)
        self.assertIn("--nodata_link is --data_link=false", text)
        self.assertEqual(text.count("--nodata_link"), 1)

    def test_a_workers_own_boolean_takes_the_same_forms(self):
        own = argparse.ArgumentParser(prog="worker.py")
        cluster_module.add_boolean_argument(own, "shuffle", default=True, help="shuffle the batches")
        self.assertIs(own.parse_args([]).shuffle, True)
        self.assertIs(own.parse_args(["--noshuffle"]).shuffle, False)
        self.assertIs(own.parse_args(["--shuffle=0"]).shuffle, False)
        self.assertIs(own.parse_args(["--noshuffle", "--shuffle=true"]).shuffle, True)


class ParseClusterTest(unittest.TestCase):
    def run_worker(self, *argv):
        # A real process: parse_cluster is what a worker script calls, and
        # the exit code is what a launcher sees.
        return subprocess.run([sys.executable, "-c", "import parasync; print(parasync.parse_cluster()[0].data_link)",
                               *argv], capture_output=True, text=True, env=dict(os.environ), timeout=60)

    def test_a_worker_script_takes_the_forms_and_exits_2_on_another(self):
        self.assertEqual(self.run_worker(*HOSTS, "--nodata_link").stdout.strip(), "False")
        self.assertEqual(self.run_worker(*HOSTS, "--data_link=true").stdout.strip(), "True")
        bad = self.run_worker(*HOSTS, "--data_link=on")
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("--data_link=on: must be 1 or 0, or true or false", bad.stderr)


if __name__ == "__main__":
    unittest.main()
