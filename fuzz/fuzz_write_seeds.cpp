// Writes the binary seeds of the fuzz corpus: checkpoints saved by
// CheckpointStore (and damaged copies), IDX files, parasync-node command
// lines (NUL-separated) and ps:0 request sessions. The text seeds (addresses,
// TF_CONFIG, cluster files, CSV) are written by hand. Usage:
//   fuzz_write_seeds fuzz/corpus
#include "formats/checkpoint.h"
#include "proto/parasync.pb.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

using namespace parasync;
namespace fs = std::filesystem;

namespace {

fs::path g_corpus;

void write(const std::string &target, const std::string &name, const std::string &bytes)
{
    fs::create_directories(g_corpus / target);
    std::ofstream(g_corpus / target / name, std::ios::binary) << bytes;
}

proto::Checkpoint linearCheckpoint(int64_t step, const char *optimizer, const std::vector<const char *> &slots)
{
    proto::Checkpoint checkpoint;
    checkpoint.set_global_step(step);
    checkpoint.set_wall_time(1.7e9);
    auto *signature = checkpoint.mutable_signature();
    signature->set_model("linear");
    signature->set_dataset("linear");
    signature->set_feature_dim(1);
    signature->set_output_dim(1);
    signature->set_optimizer(optimizer);
    for (const char *name : {"w", "b"}) {
        auto *variable = signature->add_variables();
        variable->set_name(name);
        variable->add_shape(1);
    }
    checkpoint.mutable_mode()->set_mode(proto::SSP);
    checkpoint.mutable_mode()->set_staleness(2);
    auto *shard = checkpoint.add_shards();
    shard->set_ps_index(0);
    float value = 2.0f;
    for (const char *name : {"w", "b"}) {
        auto *variable = shard->add_variables();
        variable->set_name(name);
        variable->mutable_value()->add_shape(1);
        variable->mutable_value()->add_values(value);
        for (const char *slot : slots) {
            proto::Tensor &tensor = (*variable->mutable_slots())[slot];
            tensor.add_shape(1);
            tensor.add_values(0.5f);
        }
        variable->set_update_count(step);
        value = 10.0f;
    }
    return checkpoint;
}

std::string savedByStore(const proto::Checkpoint &checkpoint)
{
    const fs::path directory = fs::temp_directory_path() / "parasync-fuzz-seeds";
    fs::remove_all(directory);
    CheckpointStore store(directory.string());
    const std::string path = store.save(checkpoint);
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove_all(directory);
    return bytes;
}

// A model of a dense variable and an embedding table of 40 rows.
proto::Checkpoint sparseCheckpoint()
{
    proto::Checkpoint checkpoint;
    checkpoint.set_global_step(300);
    checkpoint.mutable_signature()->set_model("sparse_lr");
    checkpoint.mutable_signature()->set_optimizer("adagrad");
    auto *bias = checkpoint.add_variables();
    bias->set_name("bias");
    bias->mutable_value()->add_shape(1);
    bias->mutable_value()->add_values(0.25f);
    auto *table = checkpoint.add_tables();
    table->set_name("fields");
    table->add_slot_names("accumulator");
    for (int r = 0; r < 40; ++r) {
        table->add_ids(uint64_t(r) * 13 + 2);
        for (int c = 0; c < 4; ++c) {
            table->add_values(float(r) / 8 + float(c));
            table->add_slots(0.1f * float(c + 1));
        }
    }
    return checkpoint;
}

// The checkpoints CheckpointStore writes (format 2: pieces) and damaged
// copies. The "v1-" seeds are format 1's, written before pieces, kept as
// they were: those files are still read.
void checkpoints()
{
    const std::string adagrad = savedByStore(linearCheckpoint(1200, "adagrad", {"accumulator"}));
    write("fuzz_checkpoint", "linear-adagrad-1200.pckpt", adagrad);
    write("fuzz_checkpoint", "linear-adam-40.pckpt", savedByStore(linearCheckpoint(40, "adam", {"m", "v"})));
    // A piece of 256 bytes at most: a dozen pieces, rows in several.
    write("fuzz_checkpoint", "sparse-pieces-300.pckpt", serializeCheckpoint(sparseCheckpoint(), 256));
    write("fuzz_checkpoint", "truncated.pckpt", adagrad.substr(0, adagrad.size() / 2));
    std::string flipped = adagrad;
    flipped[30] = char(flipped[30] ^ 0x40);
    write("fuzz_checkpoint", "checksum-mismatch.pckpt", flipped);
    // The first piece's length (its CRC then fails).
    std::string huge = adagrad;
    huge[27] = char(0x7f);
    write("fuzz_checkpoint", "impossible-length.pckpt", huge);
    write("fuzz_checkpoint", "bad-magic.pckpt", "PSYNCKQ2" + adagrad.substr(8));
}

std::string bigEndian32(uint32_t value)
{
    return {char(value >> 24), char(value >> 16), char(value >> 8), char(value)};
}

// One shard-options byte, the images file's length (2 bytes, little-endian),
// the images file, the labels file.
std::string idxInput(uint8_t options, const std::string &images, const std::string &labels)
{
    std::string input(1, char(options));
    input.push_back(char(images.size() & 0xff));
    input.push_back(char(images.size() >> 8));
    return input + images + labels;
}

void idx()
{
    std::string images = bigEndian32(0x803) + bigEndian32(3) + bigEndian32(2) + bigEndian32(2);
    for (int i = 0; i < 12; ++i)
        images.push_back(char(i * 20));
    const std::string labels = bigEndian32(0x801) + bigEndian32(3) + std::string("\x00\x07\x02", 3);
    write("fuzz_idx", "three-2x2-images.bin", idxInput(0, images, labels));
    write("fuzz_idx", "shard-1-of-2.bin", idxInput(1 | 1 << 2, images, labels));
    write("fuzz_idx", "swapped.bin", idxInput(0, labels, images));
    write("fuzz_idx", "truncated-images.bin", idxInput(0, images.substr(0, 20), labels));
    write("fuzz_idx", "count-mismatch.bin",
          idxInput(0, images, bigEndian32(0x801) + bigEndian32(2) + std::string("\x01\x02", 2)));
}

// TF_CONFIG (empty: unset), then the arguments, NUL-separated.
std::string commandLine(const std::string &tfConfig, const std::vector<std::string> &args)
{
    std::string input = tfConfig;
    for (const std::string &arg : args)
        input += std::string(1, '\0') + arg;
    return input;
}

void nodeFlags()
{
    const std::string hosts = "--ps_hosts=127.0.0.1:2222";
    const std::string workers = "--worker_hosts=127.0.0.1:2223,127.0.0.1:2224";
    write("fuzz_node_flags", "seed-ps.bin", commandLine("", {hosts, workers, "--job_name=ps", "--task_index=0"}));
    write("fuzz_node_flags", "seed-worker-sync.bin",
          commandLine("",
                      {hosts, workers, "--job_name=worker", "--task_index=1", "--issync=1", "--replicas_to_aggregate=2",
                       "--learning_rate=0.1", "--optimizer=adam", "--seed=18446744073709551615"}));
    write("fuzz_node_flags", "tf-config-chief.bin",
          commandLine(R"({"cluster": {"chief": ["127.0.0.1:2223"], "ps": ["127.0.0.1:2222"],
                          "worker": ["127.0.0.1:2224"]}, "task": {"type": "worker", "index": 0}})",
                      {"--mode=ssp", "--staleness=3"}));
    write(
        "fuzz_node_flags", "cluster-file.bin",
        commandLine("", {"--cluster_file=good.json", "--job_name", "worker", "--task_index", "1", "--batch_size=20"}));
    write("fuzz_node_flags", "bad-cluster-file.bin", commandLine("", {"--cluster_file=bad.json", "-job_name=ps"}));
    write("fuzz_node_flags", "typo.bin", commandLine("", {hosts, workers, "--job_name=ps", "--lerning_rate=1"}));
    write("fuzz_node_flags", "conflict.bin",
          commandLine("", {hosts, workers, "--job_name=worker", "--issync=0", "--mode=sync"}));
    write("fuzz_node_flags", "help.bin", commandLine("", {"--help"}));
}

// A request session: one configuration byte, then [kind][length LE16][bytes].
class Session
{
public:
    explicit Session(uint8_t configuration) : m_bytes(1, char(configuration)) {}
    Session &add(int kind, const google::protobuf::MessageLite &message)
    {
        return addRaw(kind, message.SerializeAsString());
    }
    Session &addRaw(int kind, const std::string &bytes)
    {
        m_bytes.push_back(char(kind));
        m_bytes.push_back(char(bytes.size() & 0xff));
        m_bytes.push_back(char(bytes.size() >> 8));
        m_bytes += bytes;
        return *this;
    }
    const std::string &bytes() const { return m_bytes; }

private:
    std::string m_bytes;
};

enum { Initialize = 0, SetMode = 1, Train = 2, Status = 3 };

proto::TrainRequest join(int worker)
{
    proto::TrainRequest request;
    request.mutable_join()->set_worker_index(worker);
    request.mutable_join()->set_pid(4242);
    return request;
}

proto::TrainRequest push(int64_t fromStep, float w, float b)
{
    proto::TrainRequest request;
    auto *push = request.mutable_push();
    push->set_computed_from_step(fromStep);
    for (float g : {w, b}) {
        auto *tensor = push->add_gradients();
        tensor->add_shape(1);
        tensor->add_values(g);
    }
    push->set_batch_loss(1.5f);
    push->add_parameter_view(2.0f);
    push->add_parameter_view(10.0f);
    return request;
}

proto::TrainRequest leave(bool finished)
{
    proto::TrainRequest request;
    request.mutable_leave()->set_finished(finished);
    return request;
}

proto::SetModeRequest mode(proto::UpdateMode updateMode, int staleness, int replicas)
{
    proto::SetModeRequest request;
    request.mutable_mode()->set_mode(updateMode);
    request.mutable_mode()->set_staleness(staleness);
    request.mutable_mode()->set_replicas_to_aggregate(replicas);
    request.set_requested_by("fuzz seed");
    return request;
}

void requests()
{
    const proto::Checkpoint checkpoint = linearCheckpoint(3, "adagrad", {"accumulator"});
    proto::InitializeRequest initialize;
    *initialize.mutable_shard() = checkpoint.shards(0);
    *initialize.mutable_signature() = checkpoint.signature();
    initialize.set_global_step(3);
    initialize.set_origin("restored from model.ckpt-3.pckpt");

    // Configuration byte: optimizer (bits 0-1), mode (bits 2-3), --logdir (bit 5), apply NaN (bit 6).
    for (const uint8_t configuration : {0x00, 0x20}) {
        write("fuzz_requests", configuration ? "async-with-run-directory.bin" : "async-two-workers.bin",
              Session(configuration)
                  .add(Initialize, initialize)
                  .add(Train, join(0))
                  .add(Train, push(3, 0.5f, -0.5f))
                  .add(Train, join(1))
                  .add(Train, push(4, 0.1f, 0.2f))
                  .add(Train, push(2, 0.1f, 0.2f))
                  .add(Status, proto::ClusterStatusRequest())
                  .add(Train, leave(true))
                  .bytes());
    }
    write("fuzz_requests", "sync-then-ssp.bin",
          Session(2 | 1 << 2)
              .add(Initialize, initialize)
              .add(Train, join(0))
              .add(Train, push(3, 1.0f, 1.0f))
              .add(Train, join(1))
              .add(Train, push(3, 3.0f, 3.0f))
              .add(SetMode, mode(proto::SSP, 1, 0))
              .add(Train, push(4, 1.0f, 1.0f))
              .add(Train, push(5, 1.0f, 1.0f))
              .add(Status, proto::ClusterStatusRequest())
              .add(Train, leave(false))
              .bytes());
    write("fuzz_requests", "nan-and-bad-pushes.bin",
          Session(3 | 2 << 2 | 0x40)
              .add(Initialize, initialize)
              .add(Train, join(1))
              .add(Train, push(3, std::numeric_limits<float>::quiet_NaN(), 0.0f))
              .add(Train, push(99, 1.0f, 1.0f))
              .add(Train, join(7))
              .add(SetMode, mode(proto::SYNC, 0, 5))
              .add(SetMode, mode(proto::UPDATE_MODE_UNSPECIFIED, -1, 0))
              .add(Status, proto::ClusterStatusRequest())
              .bytes());
    write("fuzz_requests", "push-before-initialize.bin",
          Session(1)
              .add(Train, join(0))
              .add(Train, push(0, 1.0f, 1.0f))
              .add(Status, proto::ClusterStatusRequest())
              .add(Initialize, initialize)
              .add(Initialize, initialize)
              .bytes());
    write("fuzz_requests", "garbage.bin",
          Session(0).addRaw(Initialize, "\xff\xff\xff\x0f").addRaw(Train, "\x0a\x80").addRaw(Status, "").bytes());
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR (fuzz/corpus)\n", argv[0]);
        return 2;
    }
    g_corpus = argv[1];
    checkpoints();
    idx();
    nodeFlags();
    requests();
    return 0;
}
