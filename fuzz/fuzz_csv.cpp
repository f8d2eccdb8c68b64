// readCsv (--dataset=csv:PATH) on arbitrary file contents. The first byte
// picks the reader's options (classification or regression, which shard of
// how many); the rest is the file. A CSV that loads must give a shard whose
// shape and values the models can use.
#include "base/error.h"
#include "engine/dataset.h"
#include "memory_file.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace parasync;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const bool classification = (data[0] & 1) != 0;
    const int numShards = 1 + (data[0] >> 1) % 3;
    const int shardIndex = (data[0] >> 3) % numShards;
    const fuzz::MemoryFile file("data.csv", data + 1, size - 1);
    try {
        const Dataset set = readCsv(file.path(), classification, shardIndex, numShards);
        const bool shapeOk
            = set.size() > 0 && set.featureDim() > 0 && set.targets.rows() == set.size() && set.targets.cols() == 1;
        const bool valuesOk = set.features.allFinite() && set.targets.allFinite();
        const bool classesOk = !classification
                               || (set.numClasses > 0 && set.targets.minCoeff() >= 0.0f
                                   && set.targets.maxCoeff() < float(set.numClasses));
        if (!shapeOk || !valuesOk || !classesOk) {
            std::fprintf(stderr,
                         "readCsv accepted a file but gave %lld x %lld features, %lld targets, "
                         "%lld classes (%s)\n",
                         (long long)set.size(), (long long)set.featureDim(), (long long)set.targets.rows(),
                         (long long)set.numClasses, set.description.c_str());
            std::abort();
        }
    } catch (const InputError &) {
    }
    return 0;
}
