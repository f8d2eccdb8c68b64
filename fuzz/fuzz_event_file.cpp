// TensorBoard event files (parasync --open on a directory holding only
// events.out.tfevents.*) on arbitrary bytes, three ways:
//  1. the bytes as the file: framing, lengths and CRCs checked;
//  2. the bytes cut into records (a length byte, then that many bytes), each
//     framed with valid CRCs after a file_version event, so the fuzzer reaches
//     the Event parser and, through replayEventFiles, the run state the
//     charts draw from (any step, wall time or value a file may claim);
//  3. a framed Event that parses must read back as itself.
#include "base/error.h"
#include "formats/event_file.h"
#include "memory_file.h"
#include "orchestration/run_replay.h"
#include "orchestration/run_state.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

using namespace parasync;

namespace {

// replayEventFiles reads a directory, so the framed file goes into one that
// belongs to this fuzzer process, under $TMPDIR (scripts/fuzz.sh points it
// at its own work directory, which it removes).
std::string g_runDirectory;

void removeRunDirectory()
{
    std::error_code ignored;
    std::filesystem::remove_all(g_runDirectory, ignored);
}

std::string fileVersionRecord()
{
    tensorboard::Event version;
    version.set_wall_time(1);
    version.set_file_version(event_files::kFileVersion);
    return frameRecord(version.SerializeAsString());
}

void readRaw(const uint8_t *data, size_t size)
{
    const fuzz::MemoryFile file("events.out.tfevents.1.fuzz", data, size);
    try {
        const auto events = readEventFile(file.path());
        if (events.empty() || events.front().file_version().rfind("brain.Event:", 0) != 0) {
            std::fprintf(stderr, "readEventFile accepted a file without a leading file_version event\n");
            std::abort();
        }
    } catch (const InputError &) {
    }
}

void replayFramed(const uint8_t *data, size_t size)
{
    std::string file = fileVersionRecord();
    size_t records = 1;
    for (size_t i = 0; i < size; ++records) {
        const size_t length = std::min<size_t>(data[i], size - i - 1);
        file += frameRecord(std::string(reinterpret_cast<const char *>(data + i + 1), length));
        i += 1 + length;
    }
    const std::string path = g_runDirectory + "/events.out.tfevents.1.fuzz";
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(file.data(), std::streamsize(file.size()));
        if (!out) {
            std::fprintf(stderr, "cannot write %s\n", path.c_str());
            std::abort();
        }
    }
    RunState state;
    RunDirectoryInfo info;
    try {
        replayEventFiles(g_runDirectory, &state, &info);
        if (info.records != int64_t(records)) {
            std::fprintf(stderr, "replayEventFiles read %lld records of %zu, without an error\n",
                         (long long)info.records, records);
            std::abort();
        }
        // What the charts draw from: every figure of every step.
        const RunSnapshot snapshot = state.snapshot();
        (void)snapshot;
    } catch (const InputError &) {
    }
}

void roundTrip(const uint8_t *data, size_t size)
{
    tensorboard::Event event;
    if (!event.ParseFromArray(data, int(size)))
        return;
    const std::string bytes = event.SerializeAsString();
    const std::string file = fileVersionRecord() + frameRecord(bytes);
    const fuzz::MemoryFile memory("events.out.tfevents.2.fuzz", reinterpret_cast<const uint8_t *>(file.data()),
                                  file.size());
    const auto events = readEventFile(memory.path()); // an InputError here is the bug itself
    if (events.size() != 2 || events[1].SerializeAsString() != bytes) {
        std::fprintf(stderr, "a framed Event read back as %zu events, or differently\n", events.size());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    // Random bytes make protobuf log every string field with invalid UTF-8.
    google::protobuf::SetLogHandler(nullptr);
    const char *temporary = std::getenv("TMPDIR");
    std::string pattern = std::string(temporary && *temporary ? temporary : "/tmp") + "/parasync-fuzz-events.XXXXXX";
    if (!::mkdtemp(pattern.data()))
        std::abort();
    g_runDirectory = pattern;
    std::atexit(removeRunDirectory);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    readRaw(data, size);
    replayFramed(data, size);
    roundTrip(data, size);
    return 0;
}
