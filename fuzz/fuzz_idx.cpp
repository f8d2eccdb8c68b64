// readIdx (--dataset=mnist:DIR, idx:IMAGES,LABELS) on arbitrary file
// contents. Input: one byte of shard options, two bytes (little-endian) for
// the images file's length, the images file, then the labels file.
#include "base/error.h"
#include "engine/dataset.h"
#include "memory_file.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace parasync;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    const int numShards = 1 + data[0] % 3;
    const int shardIndex = (data[0] >> 2) % numShards;
    const size_t imagesSize = std::min<size_t>(size - 3, size_t(data[1]) | size_t(data[2]) << 8);
    const fuzz::MemoryFile images("images-idx3-ubyte", data + 3, imagesSize);
    const fuzz::MemoryFile labels("labels-idx1-ubyte", data + 3 + imagesSize, size - 3 - imagesSize);
    try {
        const Dataset set = readIdx(images.path(), labels.path(), shardIndex, numShards);
        const bool ok = set.size() > 0 && set.featureDim() > 0 && set.targets.rows() == set.size()
                        && set.numClasses >= 1 && set.numClasses <= 256
                        && set.targets.maxCoeff() < float(set.numClasses) && set.features.minCoeff() >= 0.0f
                        && set.features.maxCoeff() <= 1.0f;
        if (!ok) {
            std::fprintf(stderr, "readIdx accepted the files but gave %lld x %lld features, %lld classes (%s)\n",
                         (long long)set.size(), (long long)set.featureDim(), (long long)set.numClasses,
                         set.description.c_str());
            std::abort();
        }
    } catch (const InputError &) {
    }
    return 0;
}
