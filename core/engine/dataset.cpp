#include "engine/dataset.h"

#include "engine/click_log.h"
#include "engine/low_rank.h"

#include "base/error.h"
#include "engine/model.h"
#include "engine/sparse_models.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string_view>
#include <vector>

namespace parasync {

namespace {

namespace fs = std::filesystem;

using RowMajorMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMajorBytes = Eigen::Matrix<unsigned char, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Beyond this a class index is almost surely a regression target or a typo,
// and the softmax model's weights would not fit in memory.
constexpr int64_t maxClasses = 100000;

std::string number(double x)
{
    std::ostringstream out;
    out << x;
    return out.str();
}

// Distinct shards and seeds must not share a random stream (seed + shard would
// make seed 1 shard 0 equal seed 0 shard 1).
uint64_t shardSeed(uint64_t seed, int shardIndex)
{
    return seed * 1000003u + static_cast<uint64_t>(shardIndex);
}

void checkShard(int shardIndex, int numShards)
{
    if (numShards < 1)
        throw InputError("the number of data shards must be at least 1, got " + std::to_string(numShards));
    if (shardIndex < 0 || shardIndex >= numShards) {
        throw InputError("data shard " + std::to_string(shardIndex) + " does not exist: there are "
                         + std::to_string(numShards) + " shards, numbered 0 to " + std::to_string(numShards - 1));
    }
}

std::string shardText(int shardIndex, int numShards)
{
    return "shard " + std::to_string(shardIndex) + " of " + std::to_string(numShards);
}

// Rows shardIndex, shardIndex + numShards, ... of `total`; throws when the shard would be empty.
Eigen::Index shardRows(int64_t total, int shardIndex, int numShards, const std::string &what)
{
    if (total <= shardIndex) {
        throw InputError(what + " has " + std::to_string(total) + " samples, too few for "
                         + shardText(shardIndex, numShards) + "; use fewer workers or more data");
    }
    return static_cast<Eigen::Index>((total - shardIndex + numShards - 1) / numShards);
}

// The rows of a dataset of `total` rows that a task takes, in order; throws
// InputError when it would take none.
using RowPick = std::function<std::vector<Eigen::Index>(int64_t total, const std::string &what)>;

std::string fractionText(double fraction)
{
    return "--eval_fraction=" + number(fraction);
}

// A worker's shard: rows shardIndex, shardIndex + numShards, ... less the
// rows --eval_fraction holds out.
RowPick shardPick(int shardIndex, int numShards, double evalFraction, uint64_t seed)
{
    return [=](int64_t total, const std::string &what) {
        shardRows(total, shardIndex, numShards, what);
        std::optional<HeldOutRows> heldOut;
        if (evalFraction > 0)
            heldOut.emplace(evalFraction, seed, total);
        std::vector<Eigen::Index> rows;
        for (int64_t r = shardIndex; r < total; r += numShards)
            if (!heldOut || !heldOut->contains(r))
                rows.push_back(Eigen::Index(r));
        if (rows.empty())
            throw InputError(what + " has " + std::to_string(total) + " samples; " + fractionText(evalFraction)
                             + " holds out all of " + shardText(shardIndex, numShards)
                             + ": use a smaller fraction, fewer workers or more data");
        return rows;
    };
}

RowPick heldOutPick(double evalFraction, uint64_t seed)
{
    return [=](int64_t total, const std::string &) {
        const HeldOutRows heldOut(evalFraction, seed, total);
        std::vector<Eigen::Index> rows;
        for (int64_t r = 0; r < total; ++r)
            if (heldOut.contains(r))
                rows.push_back(Eigen::Index(r));
        return rows;
    };
}

std::vector<Eigen::Index> allRows(int64_t total, const std::string &)
{
    std::vector<Eigen::Index> rows(static_cast<size_t>(total));
    std::iota(rows.begin(), rows.end(), Eigen::Index(0));
    return rows;
}

std::string missingFileMessage(const fs::path &path)
{
    std::string message = "'" + path.string() + "' does not exist";
    fs::path gz = path;
    gz += ".gz";
    std::error_code ec;
    if (fs::exists(gz, ec))
        message += " (there is a compressed '" + gz.string() + "': decompress it with gunzip)";
    return message;
}

std::vector<char> readWholeFile(const fs::path &path)
{
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw InputError(missingFileMessage(path));
    if (fs::is_directory(path, ec))
        throw InputError("'" + path.string() + "' is a directory, expected a data file");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw InputError("cannot open '" + path.string() + "' for reading; check its permissions");
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad())
        throw InputError("reading '" + path.string() + "' failed");
    return bytes;
}

// ---- IDX -------------------------------------------------------------------

constexpr uint32_t idxImagesMagic = 0x00000803;
constexpr uint32_t idxLabelsMagic = 0x00000801;

uint32_t readBigEndian32(const std::vector<char> &bytes, size_t offset)
{
    uint32_t value = 0;
    for (size_t i = 0; i < 4; ++i)
        value = (value << 8) | static_cast<unsigned char>(bytes[offset + i]);
    return value;
}

std::string hex32(uint32_t value)
{
    std::ostringstream out;
    out << "0x" << std::hex;
    out.width(8);
    out.fill('0');
    out << value;
    return out.str();
}

struct IdxFile
{
    std::vector<char> bytes;
    std::vector<uint32_t> dims;
    size_t headerSize = 0;

    const unsigned char *payload() const { return reinterpret_cast<const unsigned char *>(bytes.data()) + headerSize; }
};

IdxFile readIdxFile(const std::string &path, uint32_t expectedMagic, const std::string &kind)
{
    IdxFile file;
    file.bytes = readWholeFile(path);
    const size_t expectedDims = expectedMagic & 0xff;
    const std::string name = "'" + path + "'";
    if (file.bytes.size() < 4) {
        throw InputError(name + " is too short to be an IDX " + kind + " file (" + std::to_string(file.bytes.size())
                         + " bytes)");
    }
    const uint32_t magic = readBigEndian32(file.bytes, 0);
    if (magic != expectedMagic) {
        std::string message = name + " is not an IDX " + kind + " file: its magic number is " + hex32(magic)
                              + ", expected " + hex32(expectedMagic) + " (unsigned bytes, "
                              + std::to_string(expectedDims) + " dimensions)";
        const uint32_t otherMagic = expectedMagic == idxImagesMagic ? idxLabelsMagic : idxImagesMagic;
        if (magic == otherMagic)
            message += "; are the images and labels files swapped?";
        throw InputError(message);
    }
    file.headerSize = 4 + 4 * expectedDims;
    if (file.bytes.size() < file.headerSize) {
        throw InputError(name + " is truncated: the IDX header needs " + std::to_string(file.headerSize)
                         + " bytes, the file has " + std::to_string(file.bytes.size()));
    }
    const uint64_t payloadSize = file.bytes.size() - file.headerSize;
    // The product of the dimensions is checked against the file size step by step so it cannot overflow.
    uint64_t expected = 1;
    bool tooLarge = false;
    for (size_t i = 0; i < expectedDims; ++i) {
        const uint32_t dim = readBigEndian32(file.bytes, 4 + 4 * i);
        file.dims.push_back(dim);
        if (dim == 0)
            throw InputError(name + " has an empty dimension (dimension " + std::to_string(i) + " is 0)");
        if (expected > payloadSize / dim)
            tooLarge = true;
        else
            expected *= dim;
    }
    if (tooLarge || expected != payloadSize) {
        std::string shape;
        for (const uint32_t dim : file.dims)
            shape += (shape.empty() ? "" : " x ") + std::to_string(dim);
        throw InputError(name + (tooLarge || expected > payloadSize ? " is truncated" : " has extra bytes")
                         + ": its header says " + shape + " bytes of data, but " + std::to_string(payloadSize)
                         + " bytes follow the " + std::to_string(file.headerSize)
                         + "-byte header; download or extract it again");
    }
    return file;
}

// ---- CSV -------------------------------------------------------------------

std::string_view trim(std::string_view text)
{
    constexpr std::string_view space = " \t\r\n\f\v";
    const size_t first = text.find_first_not_of(space);
    if (first == std::string_view::npos)
        return {};
    return text.substr(first, text.find_last_not_of(space) - first + 1);
}

std::vector<std::string_view> splitCells(std::string_view line)
{
    std::vector<std::string_view> cells;
    size_t start = 0;
    while (true) {
        const size_t comma = line.find(',', start);
        cells.push_back(trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
        if (comma == std::string_view::npos)
            return cells;
        start = comma + 1;
    }
}

std::optional<float> parseNumber(std::string_view text)
{
    if (!text.empty() && text.front() == '+')
        text.remove_prefix(1);
    float value = 0.0f;
    const char *end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end)
        return std::nullopt;
    return value;
}

// A CSV file's rows `pick` chooses; `part` says which ("shard 1 of 2").
Dataset readCsvRows(const std::string &path, bool classification, const RowPick &pick, const std::string &part)
{
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw InputError(missingFileMessage(path));
    if (fs::is_directory(path, ec))
        throw InputError("'" + path + "' is a directory, expected a CSV file");
    std::ifstream in(path);
    if (!in)
        throw InputError("cannot open '" + path + "' for reading; check its permissions");

    const std::string where = path + ": ";
    std::vector<float> values;
    size_t columns = 0;
    int64_t rows = 0;
    int64_t maxClass = -1;
    bool header = false;
    std::string line;
    for (int64_t lineNumber = 1; std::getline(in, line); ++lineNumber) {
        std::string_view text = line;
        // Spreadsheets often save a UTF-8 byte order mark.
        if (lineNumber == 1 && text.substr(0, 3) == "\xEF\xBB\xBF")
            text.remove_prefix(3);
        if (trim(text).empty())
            continue;
        const std::vector<std::string_view> cells = splitCells(text);
        const std::string at = where + "line " + std::to_string(lineNumber);

        if (columns == 0) {
            columns = cells.size();
            if (columns < 2) {
                throw InputError(at + " has 1 column; a CSV needs at least one feature column and "
                                 + "the target in the last column");
            }
            // An empty cell is a data row's mistake, not a column name.
            header = std::any_of(cells.begin(), cells.end(),
                                 [](std::string_view cell) { return !cell.empty() && !parseNumber(cell); });
            if (header)
                continue;
        } else if (cells.size() != columns) {
            throw InputError(at + " has " + std::to_string(cells.size()) + " columns, expected "
                             + std::to_string(columns) + " as in the first row");
        }

        for (size_t c = 0; c < cells.size(); ++c) {
            const std::string cellAt = at + ", column " + std::to_string(c + 1) + ": ";
            const std::optional<float> value = parseNumber(cells[c]);
            if (cells[c].empty())
                throw InputError(cellAt + "the cell is empty; every cell needs a number");
            if (!value)
                throw InputError(cellAt + "'" + std::string(cells[c]) + "' is not a number");
            if (!std::isfinite(*value))
                throw InputError(cellAt + "'" + std::string(cells[c]) + "' is not a finite number");
            if (classification && c + 1 == columns) {
                if (*value < 0.0f || *value != std::floor(*value)) {
                    throw InputError(cellAt + "the class index '" + std::string(cells[c])
                                     + "' must be a whole number 0 or greater");
                }
                if (*value >= static_cast<float>(maxClasses)) {
                    throw InputError(cellAt + "the class index '" + std::string(cells[c]) + "' is too large (at most "
                                     + std::to_string(maxClasses - 1) + "); classes are numbered from 0");
                }
                maxClass = std::max(maxClass, static_cast<int64_t>(*value));
            }
            values.push_back(*value);
        }
        ++rows;
    }
    if (in.bad())
        throw InputError("reading '" + path + "' failed");
    if (rows == 0) {
        throw InputError(where + (columns == 0 ? "the file is empty" : "the file has a header but no data rows")
                         + "; a CSV needs rows of numbers, the target in the last column");
    }

    const std::vector<Eigen::Index> shard = pick(rows, "'" + path + "'");
    const Eigen::Map<const RowMajorMatrixXf> all(values.data(), rows, static_cast<Eigen::Index>(columns));
    const auto featureCount = static_cast<Eigen::Index>(columns - 1);

    Dataset data;
    data.features = all(shard, Eigen::seqN(0, featureCount));
    data.targets = all(shard, Eigen::lastN(1));
    data.numClasses = classification ? maxClass + 1 : 0;
    data.description = "csv " + path + (header ? " (with header)" : "") + ", " + std::to_string(rows) + " rows of "
                       + std::to_string(featureCount) + " features"
                       + (classification ? " and " + std::to_string(data.numClasses) + " classes" : "") + ", " + part;
    return data;
}

Dataset readIdxRows(const std::string &imagesPath, const std::string &labelsPath, const RowPick &pick,
                    const std::string &part)
{
    const IdxFile images = readIdxFile(imagesPath, idxImagesMagic, "images");
    const IdxFile labels = readIdxFile(labelsPath, idxLabelsMagic, "labels");
    const uint32_t count = images.dims[0];
    if (labels.dims[0] != count) {
        throw InputError("'" + imagesPath + "' has " + std::to_string(count) + " images but '" + labelsPath + "' has "
                         + std::to_string(labels.dims[0])
                         + " labels; use the labels file that belongs to these images");
    }
    const auto pixels = static_cast<Eigen::Index>(images.dims[1]) * images.dims[2];
    const std::vector<Eigen::Index> rows = pick(count, "'" + imagesPath + "'");

    const Eigen::Map<const RowMajorBytes> allImages(images.payload(), count, pixels);
    const Eigen::Map<const Eigen::Matrix<unsigned char, Eigen::Dynamic, 1>> allLabels(labels.payload(), count);

    Dataset data;
    data.features = allImages(rows, Eigen::all).cast<float>() / 255.0f;
    data.targets = allLabels(rows).cast<float>();
    // From the whole file, so that every shard agrees on the number of classes.
    data.numClasses = static_cast<int64_t>(allLabels.maxCoeff()) + 1;
    data.description = "idx " + imagesPath + ", " + std::to_string(count) + " images of "
                       + std::to_string(images.dims[1]) + "x" + std::to_string(images.dims[2]) + ", "
                       + std::to_string(data.numClasses) + " classes, " + part;
    return data;
}

} // namespace

Dataset readCsv(const std::string &path, bool classification, int shardIndex, int numShards)
{
    checkShard(shardIndex, numShards);
    return readCsvRows(path, classification, shardPick(shardIndex, numShards, 0, 0), shardText(shardIndex, numShards));
}

Dataset readIdx(const std::string &imagesPath, const std::string &labelsPath, int shardIndex, int numShards)
{
    checkShard(shardIndex, numShards);
    return readIdxRows(imagesPath, labelsPath, shardPick(shardIndex, numShards, 0, 0),
                       shardText(shardIndex, numShards));
}

Dataset makeLinearData(uint64_t seed, int64_t samples, float w, float b, float noiseStddev)
{
    if (samples < 1)
        throw InputError("the number of samples must be at least 1, got " + std::to_string(samples));
    if (!(noiseStddev >= 0.0f) || !std::isfinite(noiseStddev))
        throw InputError("the noise standard deviation must be 0 or more, got " + number(noiseStddev));
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::normal_distribution<double> normal(0.0, 1.0);
    Dataset data;
    data.features.resize(samples, 1);
    Eigen::VectorXf noise(samples);
    for (int64_t i = 0; i < samples; ++i) {
        data.features(i, 0) = static_cast<float>(uniform(rng));
        noise[i] = static_cast<float>(normal(rng));
    }
    data.targets = (w * data.features.array() + b + noiseStddev * noise.array()).matrix();
    data.description = "linear y=" + number(w) + "x+" + number(b) + "+N(0," + number(noiseStddev) + ")";
    return data;
}

Dataset makeBlobs(uint64_t seed, int64_t samples, int64_t classes, int64_t dims)
{
    return makeBlobsShard(seed, 0, samples, classes, dims);
}

Dataset makeBlobsShard(uint64_t seed, int shardIndex, int64_t samples, int64_t classes, int64_t dims)
{
    if (samples < 1)
        throw InputError("the number of samples must be at least 1, got " + std::to_string(samples));
    if (classes < 2 || classes > maxClasses)
        throw InputError("blobs need 2 to " + std::to_string(maxClasses) + " classes, got " + std::to_string(classes));
    if (dims < 1 || dims > 100000)
        throw InputError("blobs need 1 to 100000 dimensions, got " + std::to_string(dims));

    // Centres at least minDistance apart in a box that grows until they fit,
    // so neighbouring classes overlap a little (unit spread) but stay separable.
    constexpr double minDistance = 4.0;
    std::mt19937_64 centreRng(seed ^ 0x9e3779b97f4a7c15u);
    double halfWidth = 3.0 * std::pow(static_cast<double>(classes), 1.0 / static_cast<double>(dims));
    Eigen::MatrixXf centres(classes, dims);
    for (int64_t k = 0; k < classes; ++k) {
        for (int attempt = 1;; ++attempt) {
            if (attempt % 100 == 0)
                halfWidth *= 1.25;
            std::uniform_real_distribution<double> uniform(-halfWidth, halfWidth);
            for (int64_t d = 0; d < dims; ++d)
                centres(k, d) = static_cast<float>(uniform(centreRng));
            if (k == 0 || (centres.topRows(k).rowwise() - centres.row(k)).rowwise().norm().minCoeff() >= minDistance)
                break;
        }
    }

    std::mt19937_64 rng(shardSeed(seed, shardIndex));
    std::normal_distribution<double> normal(0.0, 1.0);
    Dataset data;
    data.features.resize(samples, dims);
    data.targets.resize(samples, 1);
    for (int64_t i = 0; i < samples; ++i) {
        const int64_t k = i % classes;
        data.targets(i, 0) = static_cast<float>(k);
        for (int64_t d = 0; d < dims; ++d)
            data.features(i, d) = centres(k, d) + static_cast<float>(normal(rng));
    }
    data.numClasses = classes;
    data.description = "blobs " + std::to_string(classes) + " classes in " + std::to_string(dims) + " dimensions";
    return data;
}

namespace {

// A synthetic shard is made in memory before the first step: refuse sizes
// that would exhaust it (--samples_per_shard=10^12 would otherwise try to
// allocate terabytes and be killed by the OOM killer, with no word why).
constexpr int64_t kMaxShardValues = int64_t(1) << 28; // 1 GiB of floats

void checkShardSize(const std::string &spec, int64_t samples, int64_t valuesPerSample)
{
    if (samples <= kMaxShardValues / valuesPerSample)
        return;
    const int64_t megabytes = int64_t(std::min<double>(double(samples) * double(valuesPerSample) * 4.0 / 1e6, 9e15));
    throw InputError("dataset '" + spec + "' with " + std::to_string(samples) + " samples per shard needs about "
                     + std::to_string(megabytes) + " MB per worker, more than the "
                     + std::to_string(kMaxShardValues * 4 / 1000000) + " MB limit: lower --samples_per_shard"
                     + (valuesPerSample > 2 ? " or the dimensions" : "") + " (at most "
                     + std::to_string(kMaxShardValues / valuesPerSample) + " samples here)");
}

} // namespace

namespace {

// What a --dataset spec names: a synthetic problem drawn shard by shard
// (`drawShard`), or files whose rows a task picks (`readRows`).
struct DatasetSource
{
    std::function<Dataset(int shardIndex)> drawShard;
    std::function<Dataset(const RowPick &pick, const std::string &part)> readRows;
};

DatasetSource datasetSource(const DatasetOptions &options, const std::string &givenSpec)
{
    const std::string spec = givenSpec.empty() ? (options.classification ? "blobs" : "linear") : givenSpec;
    const auto prefixed = [&spec](std::string_view prefix) { return spec.rfind(prefix, 0) == 0; };
    const auto requireSamples = [&options] {
        if (options.samplesPerShard < 1) {
            throw InputError("the number of samples per shard must be at least 1, got "
                             + std::to_string(options.samplesPerShard));
        }
    };

    if (spec == "linear") {
        requireSamples();
        checkShardSize(spec, options.samplesPerShard, 2);
        return {[options](int shardIndex) {
                    return makeLinearData(shardSeed(options.seed, shardIndex), options.samplesPerShard);
                },
                {}};
    }
    if (spec == "blobs" || prefixed("blobs:")) {
        requireSamples();
        int64_t classes = 10;
        int64_t dims = 2;
        if (spec != "blobs") {
            const std::string_view rest = std::string_view(spec).substr(6);
            const size_t colon = rest.find(':');
            const auto parse = [](std::string_view text, int64_t &out) {
                const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
                return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
            };
            if (colon == std::string_view::npos || !parse(rest.substr(0, colon), classes)
                || !parse(rest.substr(colon + 1), dims)) {
                throw InputError("dataset '" + spec
                                 + "' is not of the form blobs:K:D with K classes and D dimensions, "
                                   "e.g. blobs:10:2");
            }
        }
        if (dims >= 1 && dims <= 100000)
            checkShardSize(spec, options.samplesPerShard, dims + 1);
        return {[options, classes, dims](int shardIndex) {
                    return makeBlobsShard(options.seed, shardIndex, options.samplesPerShard, classes, dims);
                },
                {}};
    }
    if (spec == "lowrank" || prefixed("lowrank:")) {
        requireSamples();
        const LowRankSpec lowRank = parseLowRankSpec(spec);
        return {[options, lowRank](int shardIndex) {
                    return makeLowRankShard(options.seed, shardIndex, options.samplesPerShard, lowRank);
                },
                {}};
    }
    if (spec == "clicklog" || prefixed("clicklog:")) {
        requireSamples();
        const ClickLogShape shape = parseClickLogSpec(spec);
        // Per sample: its ids (two floats' worth each), label and probability.
        checkShardSize(spec, options.samplesPerShard, 2 * shape.fields + 2);
        return {[options, shape](int shardIndex) {
                    return makeClickLog(shape, options.seed, shardIndex, options.samplesPerShard);
                },
                {}};
    }
    if (prefixed("mnist:")) {
        const fs::path dir = spec.substr(6);
        if (dir.empty())
            throw InputError("dataset 'mnist:' needs a directory, e.g. mnist:/data/mnist");
        return {{}, [dir](const RowPick &pick, const std::string &part) {
                    return readIdxRows((dir / "train-images-idx3-ubyte").string(),
                                       (dir / "train-labels-idx1-ubyte").string(), pick, part);
                }};
    }
    if (prefixed("idx:")) {
        const std::string paths = spec.substr(4);
        const size_t comma = paths.find(',');
        if (comma == std::string::npos || comma == 0 || comma + 1 == paths.size()) {
            throw InputError("dataset '" + spec + "' needs two files, idx:IMAGES,LABELS");
        }
        return {{}, [paths, comma](const RowPick &pick, const std::string &part) {
                    return readIdxRows(paths.substr(0, comma), paths.substr(comma + 1), pick, part);
                }};
    }
    if (prefixed("csv:")) {
        if (spec.size() == 4)
            throw InputError("dataset 'csv:' needs a file, e.g. csv:data.csv");
        return {{},
                [path = spec.substr(4), classification = options.classification](const RowPick &pick,
                                                                                 const std::string &part) {
                    return readCsvRows(path, classification, pick, part);
                }};
    }
    throw InputError("unknown dataset '" + spec
                     + "'; use one of: linear, blobs, blobs:K:D, lowrank:ROWS:COLS:RANK[:NOISE], mnist:DIR, "
                       "idx:IMAGES,LABELS, csv:PATH, clicklog[:FIELDS:VALUES[:ZIPF]]");
}

// The rows `keep` of `data`, in order.
Dataset takeRows(const Dataset &data, const std::vector<Eigen::Index> &keep)
{
    Dataset part;
    part.features = data.features(keep, Eigen::all);
    part.targets = data.targets(keep, Eigen::all);
    part.numClasses = data.numClasses;
    part.description = data.description;
    part.indexSizes = data.indexSizes;
    part.fields = data.fields;
    for (const Eigen::Index row : keep) {
        if (data.categorical()) {
            const std::span<const uint64_t> ids = data.idsOf(row);
            part.ids.insert(part.ids.end(), ids.begin(), ids.end());
        }
        if (!data.trueProbability.empty())
            part.trueProbability.push_back(data.trueProbability[size_t(row)]);
    }
    return part;
}

// Row i of synthetic shard k is the dataset's row k x samplesPerShard + i.
std::vector<Eigen::Index> syntheticRows(const HeldOutRows &heldOut, int shardIndex, int64_t samplesPerShard,
                                        bool wantHeldOut)
{
    std::vector<Eigen::Index> rows;
    for (int64_t i = 0; i < samplesPerShard; ++i)
        if (heldOut.contains(int64_t(shardIndex) * samplesPerShard + i) == wantHeldOut)
            rows.push_back(Eigen::Index(i));
    return rows;
}

} // namespace

HeldOutRows::HeldOutRows(double fraction, uint64_t seed, int64_t totalRows)
{
    if (!(fraction > 0 && fraction < 1))
        throw InputError(fractionText(fraction)
                         + ": must be more than 0 and less than 1, e.g. 0.2 to hold out a "
                           "fifth of the rows");
    m_count = std::llround(fraction * double(totalRows));
    if (m_count == 0)
        throw InputError(fractionText(fraction) + " of " + std::to_string(totalRows)
                         + " samples holds out none: give a larger fraction or more data");
    if (m_count >= totalRows)
        throw InputError(fractionText(fraction) + " of " + std::to_string(totalRows)
                         + " samples holds out every one, leaving none to train on: give a smaller fraction");
    // splitmix64: a fixed, well-mixed hash, the same on every host.
    const auto hash = [](uint64_t x) {
        x += 0x9e3779b97f4a7c15u;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
        return x ^ (x >> 31);
    };
    const uint64_t salt = hash(seed);
    std::vector<std::pair<uint64_t, int64_t>> ranked(static_cast<size_t>(totalRows));
    for (int64_t r = 0; r < totalRows; ++r)
        ranked[size_t(r)] = {hash(salt ^ uint64_t(r)), r};
    std::nth_element(ranked.begin(), ranked.begin() + m_count, ranked.end());
    m_heldOut.assign(size_t(totalRows), false);
    for (int64_t i = 0; i < m_count; ++i)
        m_heldOut[size_t(ranked[size_t(i)].second)] = true;
}

Dataset loadDataset(const DatasetOptions &options)
{
    checkShard(options.shardIndex, options.numShards);
    const DatasetSource source = datasetSource(options, options.spec);
    const double fraction = options.evalFraction;
    const std::string part = shardText(options.shardIndex, options.numShards)
                             + (fraction > 0 ? ", less the rows " + fractionText(fraction) + " holds out" : "");
    if (source.readRows)
        return source.readRows(shardPick(options.shardIndex, options.numShards, fraction, options.seed), part);
    Dataset data = source.drawShard(options.shardIndex);
    if (fraction > 0) {
        const HeldOutRows heldOut(fraction, options.seed, options.samplesPerShard * options.numShards);
        const auto rows = syntheticRows(heldOut, options.shardIndex, options.samplesPerShard, false);
        if (rows.empty())
            throw InputError(fractionText(fraction) + " holds out every sample of "
                             + shardText(options.shardIndex, options.numShards)
                             + ": use a smaller fraction or a larger --samples_per_shard");
        data = takeRows(data, rows);
    }
    data.description += ", " + part;
    return data;
}

Dataset loadHeldOutData(const DatasetOptions &options, const std::string &evalSpec)
{
    checkShard(options.shardIndex, options.numShards);
    if (!evalSpec.empty()) {
        const DatasetSource source = datasetSource(options, evalSpec);
        if (source.readRows)
            return source.readRows(allRows, "all rows held out (--eval_dataset)");
        // A shard index no worker has: the same problem, samples none trains on.
        Dataset data = source.drawShard(options.numShards);
        data.description += ", held out (--eval_dataset): a draw no worker trains on";
        return data;
    }
    const double fraction = options.evalFraction;
    if (!(fraction > 0))
        throw InputError("there is no held-out data: give --eval_dataset=SPEC or --eval_fraction=F");
    const DatasetSource source = datasetSource(options, options.spec);
    const std::string part = "the rows " + fractionText(fraction) + " holds out";
    if (source.readRows)
        return source.readRows(heldOutPick(fraction, options.seed), part);
    const HeldOutRows heldOut(fraction, options.seed, options.samplesPerShard * options.numShards);
    Dataset all;
    for (int k = 0; k < options.numShards; ++k) {
        const Dataset shard = takeRows(source.drawShard(k), syntheticRows(heldOut, k, options.samplesPerShard, true));
        if (k == 0) {
            all = shard;
            continue;
        }
        all.features.conservativeResize(all.size() + shard.size(), Eigen::NoChange);
        all.features.bottomRows(shard.size()) = shard.features;
        all.targets.conservativeResize(all.features.rows(), Eigen::NoChange);
        all.targets.bottomRows(shard.size()) = shard.targets;
        all.ids.insert(all.ids.end(), shard.ids.begin(), shard.ids.end());
        all.trueProbability.insert(all.trueProbability.end(), shard.trueProbability.begin(),
                                   shard.trueProbability.end());
    }
    all.description += ", " + part;
    return all;
}

std::vector<std::string_view> specArguments(std::string_view spec, std::string_view name)
{
    std::vector<std::string_view> arguments;
    if (spec.size() <= name.size())
        return arguments;
    std::string_view rest = spec.substr(name.size() + 1);
    for (size_t colon; (colon = rest.find(':')) != std::string_view::npos; rest = rest.substr(colon + 1))
        arguments.push_back(rest.substr(0, colon));
    arguments.push_back(rest);
    return arguments;
}

bool parseWhole(std::string_view text, int64_t *out)
{
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

bool parseReal(std::string_view text, double *out)
{
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

std::string defaultDatasetFor(const std::string &model)
{
    if (model == "linear")
        return "linear";
    if (isSparseModelName(model))
        return "clicklog";
    if (isMatrixFactorizationName(model))
        return "lowrank";
    if (isClassifierName(model))
        return "blobs";
    std::string known;
    for (const std::string &n : modelNames())
        known += (known.empty() ? "" : ", ") + n;
    throw InputError("unknown model '" + model + "'; known models: " + known);
}

} // namespace parasync
