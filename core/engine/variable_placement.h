#pragma once

#include "proto/parasync.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parasync {

// One piece of a variable that one ps task holds: the whole variable, or a
// slice of its rows (dimension 0). Rows are outermost in the row-major
// layout, so a slice is one contiguous run of the flattened values.
struct VariableSlice
{
    int variable = 0;     // index into the signature's variables
    int part = 0;         // 0 .. parts - 1
    int parts = 1;        // 1: the variable is whole
    int ps = 0;           // the ps task holding it
    int indexOnPs = 0;    // its place in that task's variable list
    int64_t firstRow = 0; // along dimension 0
    int64_t rows = 0;     // 0 for a scalar (whole)
    int64_t offset = 0;   // first value, in the flattened variable
    int64_t size = 0;     // values
    std::string name;     // "<variable>/part_<k>", or the variable's name when whole
    std::vector<int64_t> shape;

    bool whole() const { return parts == 1; }
};

// Where every variable of a model lives. Large variables are partitioned
// along dimension 0 as TensorFlow's min_max_variable_partitioner does
// (at most one slice per ps task, each at least --min_slice_bytes), and the
// pieces -- each variable's slices in order, a whole variable as one -- are
// placed round-robin over the ps tasks as tf.train.replica_device_setter
// places variables: the j-th on ps task j % num_ps. Without partitioning
// that is the old rule, variable i on ps task i % num_ps.
//
// The decision travels in the signature (VariableSpec.slice_rows), so the
// chief, every worker (C++ or Python) and every ps read one placement, and
// ps:0 refuses a worker that splits differently.
class VariablePlacement
{
public:
    // TensorFlow's min_max_variable_partitioner default: 256 KiB.
    static constexpr int64_t kDefaultMinSliceBytes = int64_t(256) << 10;
    // More slices than this in one signature is a hostile or broken one.
    static constexpr int kMaxSlices = 4096;

    // Decides the partitioning of `signature`'s variables for `numPs` ps
    // tasks and writes it into their slice_rows: a variable of B bytes with
    // R rows gets min(numPs, R, B / minSliceBytes) slices (at least one),
    // the first R % n of them one row longer. minSliceBytes 0 keeps every
    // variable whole.
    static void partition(proto::ModelSignature *signature, int numPs, int64_t minSliceBytes);

    // The placement `signature` declares, for a cluster of `numPs` ps tasks.
    // Checks every field as a hostile client could fill it (shapes, slice
    // counts, row sums) and throws InputError saying what is wrong.
    static VariablePlacement fromSignature(const proto::ModelSignature &signature, int numPs);

    int numPs() const { return m_numPs; }
    // Every piece, in placement order.
    const std::vector<VariableSlice> &slices() const { return m_slices; }
    // The pieces ps task `ps` holds, in the order of its variable list
    // (the order of its pushes' gradients and its answers' parameters).
    const std::vector<VariableSlice> &on(int ps) const { return m_onPs[size_t(ps)]; }
    // True when some variable is split.
    bool partitioned() const;

    // What ps task `ps` holds, in words: "softmax/W rows 0-49999 of 100000
    // (1.9 MiB), softmax/b". Empty when it holds nothing.
    std::string describe(int ps) const;

    // The shard each ps task holds, cut from whole variables (with their
    // optimizer slots) in the signature's order: what the chief initialises
    // the ps tasks with, fresh or from a checkpoint. A slot of another size
    // than its variable is left out (the ps makes a fresh one).
    std::vector<proto::ShardState> split(const std::vector<proto::VariableState> &whole) const;
    // The whole variables, joined from every ps task's shard (indexed by ps
    // task): what a checkpoint holds. Throws InputError when a shard does not
    // hold the pieces this placement gives it.
    std::vector<proto::VariableState> join(const std::vector<proto::ShardState> &shards) const;

private:
    int m_numPs = 1;
    std::vector<VariableSlice> m_slices;
    std::vector<std::vector<VariableSlice>> m_onPs;
};

} // namespace parasync
