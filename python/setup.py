"""Builds the `parasync` wheel (the rest of its description is
pyproject.toml's): setuptools' own steps, plus the protocol modules
generated from ../core/proto/*.proto -- parasync.proto.parasync_pb2,
parasync_pb2_grpc and tensorboard_pb2, with their .pyi stubs -- as
python/CMakeLists.txt generates them for the build tree, by Debian's protoc
and grpc_python_plugin (protobuf-compiler-grpc), else by grpc_tools (pip's
grpcio-tools). Nothing is downloaded.

Every file of the build goes into a scratch folder outside the source tree
(removed at the end), so a `pip install ./python` leaves the checkout as it
was.
"""

import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.errors import ExecError

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "core", "proto"))
# Each .proto, and whether it declares gRPC services (a _pb2_grpc module).
PROTOS = (("parasync.proto", True), ("tensorboard.proto", False))


def _compiler():
    """(the command that runs protoc, the flags that give it gRPC's Python plugin)."""
    protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
    if protoc and plugin:
        return [protoc], [f"--plugin=protoc-gen-grpc_python={plugin}"]
    if importlib.util.find_spec("grpc_tools") is not None:
        import grpc_tools  # its own protoc and plugin, and the well-known .proto files

        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        return [sys.executable, "-m", "grpc_tools.protoc", f"-I{well_known}"], []
    missing = " and ".join(name for name, found in (("protoc", protoc), ("grpc_python_plugin", plugin)) if not found)
    raise ExecError(f"cannot generate parasync's protocol modules: no {missing} on PATH and no grpc_tools module. "
                    "On Debian: sudo apt-get install protobuf-compiler-grpc (it brings protoc); "
                    "or install grpcio-tools into the environment that builds the package")


def generate_protocol_modules(out_dir):
    """Writes parasync/proto/*_pb2*.py(i) below `out_dir` from ../core/proto."""
    compiler, plugin = _compiler()
    # protoc names a module after the .proto's path below its -I root, and the
    # gRPC module imports the message module by that name: generated from a
    # copy at <root>/parasync/proto/, both live in and import from the package.
    with tempfile.TemporaryDirectory(prefix="parasync-proto-") as root:
        package = os.path.join(root, "parasync", "proto")
        os.makedirs(package)
        for name, has_services in PROTOS:
            source = os.path.join(PROTO_DIR, name)
            if not os.path.isfile(source):
                raise ExecError(f"{source} is missing: build the package from a Parasync checkout "
                                "(pip install ./python), whose core/proto holds it")
            copy = os.path.join(package, name)
            shutil.copyfile(source, copy)
            command = [*compiler, f"-I{root}", f"--python_out={out_dir}", f"--pyi_out={out_dir}"]
            if has_services:
                command += [*plugin, f"--grpc_python_out={out_dir}"]
            done = subprocess.run([*command, copy], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0:
                raise ExecError(f"{' '.join(command)} {copy} failed ({done.returncode}):\n{done.stdout}")


class BuildPyWithProtocol(build_py):
    """build_py, then the protocol modules into the same build folder."""

    def run(self):
        super().run()
        if not self.dry_run:
            generate_protocol_modules(self.build_lib)


# An editable install imports from the source tree, which holds no generated
# modules (and should not); setuptools would only warn that build_py failed.
if "editable_wheel" in sys.argv or "develop" in sys.argv:
    sys.exit("error: parasync cannot be installed editable (pip install -e): its protocol modules are generated "
             "at build time. Install it (pip install ./python), or use a build tree's copy: "
             "PYTHONPATH=build/dev/python")

# setuptools' build/ and parasync.egg-info/ would otherwise be written here.
scratch = tempfile.mkdtemp(prefix="parasync-wheel-")
atexit.register(shutil.rmtree, scratch, ignore_errors=True)

setup(cmdclass={"build_py": BuildPyWithProtocol},
      options={"build": {"build_base": os.path.join(scratch, "build")},
               "egg_info": {"egg_base": scratch}})
