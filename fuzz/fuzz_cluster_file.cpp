// parseClusterFile (the app's saved cluster, --cluster_file) on arbitrary
// text. An accepted file must hold every key of its "training" section (read
// in file order by a scanner of its own, which must agree with QJsonDocument)
// and read back the same after writeClusterFile, the way the app saves what
// it loaded.
#include "base/error.h"
#include "config/cluster_file.h"
#include "config/cluster_spec.h"

#include <QByteArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

using namespace parasync;

namespace {

std::string g_savedPath;

void checkEveryTrainingKeyRead(const std::string &text, const ClusterFile &file)
{
    const QJsonObject root = QJsonDocument::fromJson(QByteArray::fromStdString(text)).object();
    const qsizetype keys = root.value(QStringLiteral("training")).toObject().size();
    if (qsizetype(file.training.size()) != keys) {
        std::fprintf(stderr, "\"training\" has %lld keys, parseClusterFile read %zu\n", (long long)keys,
                     file.training.size());
        std::abort();
    }
}

void checkRoundTrip(const ClusterFile &file)
{
    try {
        writeClusterFile(g_savedPath, file);
        const ClusterFile again = readClusterFile(g_savedPath);
        if (!(again.cluster == file.cluster) || again.training != file.training || again.hosts != file.hosts
            || again.workerCommand != file.workerCommand || again.perWorkerCommand != file.perWorkerCommand
            || again.perWorker != file.perWorker) {
            std::fprintf(stderr, "the cluster file reads back differently after writeClusterFile\n");
            std::abort();
        }
    } catch (const InputError &e) {
        std::fprintf(stderr, "an accepted cluster file, written back, is refused: %s\n", e.what());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    char directory[] = "/tmp/parasync-fuzz-cluster-file-XXXXXX";
    if (!::mkdtemp(directory))
        std::abort();
    g_savedPath = std::string(directory) + "/cluster.json";
    std::atexit([] { std::filesystem::remove_all(std::filesystem::path(g_savedPath).parent_path()); });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const ClusterFile file = parseClusterFile(text, "fuzz.json");
        checkEveryTrainingKeyRead(text, file);
        checkRoundTrip(file);
    } catch (const InputError &) {
    }
    return 0;
}
