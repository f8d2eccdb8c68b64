#include "base/error.h"
#include "engine/dataset.h"
#include "engine/low_rank.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <functional>
#include <map>
#include <set>

using namespace parasync;

namespace {

QByteArray bigEndian32(quint32 value)
{
    QByteArray bytes(4, '\0');
    for (int i = 0; i < 4; ++i)
        bytes[i] = char((value >> (24 - 8 * i)) & 0xff);
    return bytes;
}

// `count` images of rows x cols; pixel p of image i is 10 i + p, so every value is recognisable.
QByteArray idxImages(quint32 count, quint32 rows, quint32 cols, quint32 magic = 0x00000803)
{
    QByteArray bytes = bigEndian32(magic) + bigEndian32(count) + bigEndian32(rows) + bigEndian32(cols);
    for (quint32 i = 0; i < count; ++i) {
        for (quint32 p = 0; p < rows * cols; ++p)
            bytes.append(char(10 * i + p));
    }
    return bytes;
}

// Label of image i is i % 3.
QByteArray idxLabels(quint32 count, quint32 magic = 0x00000801)
{
    QByteArray bytes = bigEndian32(magic) + bigEndian32(count);
    for (quint32 i = 0; i < count; ++i)
        bytes.append(char(i % 3));
    return bytes;
}

void writeFile(const QString &path, const QByteArray &contents)
{
    QFile file(path);
    QVERIFY2(file.open(QIODevice::WriteOnly), qPrintable(path));
    QCOMPARE(file.write(contents), contents.size());
}

QString messageOf(const std::function<void()> &call)
{
    try {
        call();
    } catch (const InputError &error) {
        return QString::fromUtf8(error.what());
    }
    return {};
}

// Least-squares slope and intercept of y on a single feature.
std::pair<double, double> fitLine(const Dataset &data)
{
    const Eigen::ArrayXd x = data.features.col(0).cast<double>().array();
    const Eigen::ArrayXd y = data.targets.col(0).cast<double>().array();
    const double slope = ((x - x.mean()) * (y - y.mean())).sum() / (x - x.mean()).square().sum();
    return {slope, y.mean() - slope * x.mean()};
}

Eigen::MatrixXf classMeans(const Dataset &data)
{
    Eigen::MatrixXf sums = Eigen::MatrixXf::Zero(data.numClasses, data.featureDim());
    Eigen::VectorXf counts = Eigen::VectorXf::Zero(data.numClasses);
    for (Eigen::Index i = 0; i < data.size(); ++i) {
        const auto k = Eigen::Index(data.targets(i, 0));
        sums.row(k) += data.features.row(i);
        counts[k] += 1.0f;
    }
    return sums.array().colwise() / counts.array();
}

DatasetOptions optionsFor(const QString &spec, int shardIndex = 0, int numShards = 1)
{
    DatasetOptions options;
    options.spec = spec.toStdString();
    options.shardIndex = shardIndex;
    options.numShards = numShards;
    return options;
}

} // namespace

class TestDatasets : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();

    void linearShardFollowsTheSeedsLine();
    void linearShardsDifferButRepeatForTheSameSeed();
    void blobsHaveTheRequestedClassesAndDimensions_data();
    void blobsHaveTheRequestedClassesAndDimensions();
    void blobShardsSampleTheSameCentres();
    void lowRankShardsSeeOneMatrixWithTheNoiseAsked();

    void idxRoundTripsPixelsAndLabels_data();
    void idxRoundTripsPixelsAndLabels();
    void badIdxIsRejectedWithTheReason_data();
    void badIdxIsRejectedWithTheReason();

    void csvIsRead_data();
    void csvIsRead();
    void csvShardTakesEveryNthRow();
    void badCsvIsRejectedNamingTheLine_data();
    void badCsvIsRejectedNamingTheLine();

    void loadDatasetParsesSpecs_data();
    void loadDatasetParsesSpecs();
    void loadDatasetRejectsBadSpecs_data();
    void loadDatasetRejectsBadSpecs();
    void hugeSyntheticShardsAreRefusedBeforeAllocating();
    void defaultDatasetMatchesTheModel();

    void evalFractionHoldsOutTheSameRowsFromEveryShard_data();
    void evalFractionHoldsOutTheSameRowsFromEveryShard();
    void evalFractionSpreadsOverAClassSortedFile();
    void evalDatasetIsAFileWholeOrADrawNoWorkerHas();
    void badHeldOutDataIsRefusedSayingWhatToDo_data();
    void badHeldOutDataIsRefusedSayingWhatToDo();

private:
    QString path(const QString &name) const { return m_dir.filePath(name); }
    QString expand(QString text) const { return text.replace(QLatin1String("$DIR"), m_dir.path()); }

    QTemporaryDir m_dir;
};

void TestDatasets::initTestCase()
{
    QVERIFY(m_dir.isValid());
    writeFile(path(QStringLiteral("images.idx")), idxImages(5, 3, 2));
    writeFile(path(QStringLiteral("labels.idx")), idxLabels(5));
    QVERIFY(QDir(m_dir.path()).mkdir(QStringLiteral("mnist")));
    writeFile(path(QStringLiteral("mnist/train-images-idx3-ubyte")), idxImages(7, 4, 4));
    writeFile(path(QStringLiteral("mnist/train-labels-idx1-ubyte")), idxLabels(7));
    writeFile(path(QStringLiteral("regression.csv")), "x1,x2,y\n1,2,3\n4,5,6\n7,8,9\n");
    writeFile(path(QStringLiteral("classes.csv")), "0.5,1,0\n0.25,2,1\n0.125,3,4\n");
}

void TestDatasets::linearShardFollowsTheSeedsLine()
{
    DatasetOptions options = optionsFor(QStringLiteral("linear"), 1, 2);
    options.seed = 5;
    const Dataset data = loadDataset(options);
    QCOMPARE(data.size(), 100);
    QCOMPARE(data.featureDim(), 1);
    QCOMPARE(data.targets.rows(), 100);
    QCOMPARE(data.numClasses, 0);
    QVERIFY(data.features.minCoeff() >= -1.0f && data.features.maxCoeff() <= 1.0f);
    QVERIFY(std::abs(data.features.mean()) < 0.2f);
    QVERIFY(QString::fromStdString(data.description).contains(QLatin1String("shard 1 of 2")));

    const auto [slope, intercept] = fitLine(data);
    QVERIFY2(std::abs(slope - 2.0) < 0.25, qPrintable(QString::number(slope)));
    QVERIFY2(std::abs(intercept - 10.0) < 0.15, qPrintable(QString::number(intercept)));
    const Eigen::ArrayXf residual = data.targets.col(0).array() - (2.0f * data.features.col(0).array() + 10.0f);
    const double noise = std::sqrt(residual.square().mean());
    QVERIFY2(std::abs(noise - 0.33) < 0.1, qPrintable(QString::number(noise)));
}

void TestDatasets::linearShardsDifferButRepeatForTheSameSeed()
{
    DatasetOptions options = optionsFor(QStringLiteral("linear"), 0, 2);
    options.seed = 3;
    const Dataset shard0 = loadDataset(options);
    QCOMPARE(loadDataset(options).features, shard0.features);
    QCOMPARE(loadDataset(options).targets, shard0.targets);

    options.shardIndex = 1;
    const Dataset shard1 = loadDataset(options);
    QVERIFY(shard1.features != shard0.features);

    options.shardIndex = 0;
    options.seed = 4;
    QVERIFY(loadDataset(options).features != shard0.features);
    // Seed 4 shard 0 must not be seed 3 shard 1 (no seed + shard overlap).
    QVERIFY(loadDataset(options).features != shard1.features);
}

void TestDatasets::blobsHaveTheRequestedClassesAndDimensions_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<int>("classes");
    QTest::addColumn<int>("dims");
    QTest::newRow("default") << QStringLiteral("blobs") << 10 << 2;
    QTest::newRow("3 classes in 5 dimensions") << QStringLiteral("blobs:3:5") << 3 << 5;
    QTest::newRow("2 classes in 1 dimension") << QStringLiteral("blobs:2:1") << 2 << 1;
}

void TestDatasets::blobsHaveTheRequestedClassesAndDimensions()
{
    QFETCH(QString, spec);
    QFETCH(int, classes);
    QFETCH(int, dims);
    DatasetOptions options = optionsFor(spec);
    options.classification = true;
    const Dataset data = loadDataset(options);
    QCOMPARE(data.size(), 100);
    QCOMPARE(data.numClasses, classes);
    QCOMPARE(data.featureDim(), dims);
    QCOMPARE(data.targets.minCoeff(), 0.0f);
    QCOMPARE(data.targets.maxCoeff(), float(classes - 1));
    QVERIFY((data.targets.array() == data.targets.array().floor()).all());
}

void TestDatasets::blobShardsSampleTheSameCentres()
{
    const Dataset shard0 = makeBlobsShard(8, 0, 500, 4, 3);
    const Dataset shard1 = makeBlobsShard(8, 1, 500, 4, 3);
    QVERIFY(shard0.features != shard1.features);
    // 125 samples of unit spread per class: the class means agree to ~0.1.
    const Eigen::MatrixXf means0 = classMeans(shard0);
    QVERIFY2((means0 - classMeans(shard1)).cwiseAbs().maxCoeff() < 0.5f, "shards see different centres");
    QVERIFY((means0 - classMeans(makeBlobsShard(9, 0, 500, 4, 3))).cwiseAbs().maxCoeff() > 1.0f);

    // Centres are at least 4 apart.
    for (Eigen::Index a = 0; a < 4; ++a) {
        for (Eigen::Index b = a + 1; b < 4; ++b)
            QVERIFY((means0.row(a) - means0.row(b)).norm() > 3.5f);
    }
}

// Every shard samples one matrix (an entry two shards both drew has one
// true value), with the noise asked for: drawn again without noise, the
// same seed gives the same entries, and the difference is the noise.
void TestDatasets::lowRankShardsSeeOneMatrixWithTheNoiseAsked()
{
    const LowRankSpec noisy = parseLowRankSpec("lowrank:8:6:2:0.25");
    QCOMPARE(noisy.rows, int64_t(8));
    QCOMPARE(noisy.cols, int64_t(6));
    QCOMPARE(noisy.rank, int64_t(2));
    QCOMPARE(noisy.floor(), 0.0625);
    const LowRankSpec clean{8, 6, 2, 0};
    std::map<std::pair<int, int>, float> truth;
    int shared = 0;
    double squaredNoise = 0;
    int64_t samples = 0;
    for (int shard = 0; shard < 3; ++shard) {
        const Dataset withNoise = makeLowRankShard(4, shard, 2000, noisy);
        const Dataset without = makeLowRankShard(4, shard, 2000, clean);
        QCOMPARE(withNoise.indexSizes, (std::vector<int64_t>{8, 6}));
        QCOMPARE(withNoise.features, without.features); // the same entries
        for (Eigen::Index s = 0; s < without.size(); ++s) {
            const std::pair<int, int> entry{int(without.features(s, 0)), int(without.features(s, 1))};
            QVERIFY(entry.first >= 0 && entry.first < 8 && entry.second >= 0 && entry.second < 6);
            const auto [it, added] = truth.emplace(entry, without.targets(s, 0));
            if (!added) {
                QCOMPARE(it->second, without.targets(s, 0));
                ++shared;
            }
            const double noise = double(withNoise.targets(s, 0) - without.targets(s, 0));
            squaredNoise += noise * noise;
            ++samples;
        }
    }
    QVERIFY(shared > 0);
    QCOMPARE(truth.size(), size_t(48)); // 6,000 draws cover the 48 entries
    const double meanSquaredNoise = squaredNoise / double(samples);
    QVERIFY2(std::abs(meanSquaredNoise - noisy.floor()) < 0.1 * noisy.floor(),
             qPrintable(QString::number(meanSquaredNoise)));
    // Through --dataset, as a worker loads it.
    const Dataset loaded = loadDataset(optionsFor(QStringLiteral("lowrank:8:6:2:0.25"), 1, 3));
    QCOMPARE(loaded.indexSizes, (std::vector<int64_t>{8, 6}));
    QCOMPARE(loaded.featureDim(), int64_t(2));
}

void TestDatasets::idxRoundTripsPixelsAndLabels_data()
{
    QTest::addColumn<int>("shardIndex");
    QTest::addColumn<int>("numShards");
    QTest::addColumn<QList<int>>("images");
    QTest::newRow("whole file") << 0 << 1 << QList<int>{0, 1, 2, 3, 4};
    QTest::newRow("shard 0 of 2") << 0 << 2 << QList<int>{0, 2, 4};
    QTest::newRow("shard 1 of 2") << 1 << 2 << QList<int>{1, 3};
    QTest::newRow("shard 2 of 3") << 2 << 3 << QList<int>{2};
}

void TestDatasets::idxRoundTripsPixelsAndLabels()
{
    QFETCH(int, shardIndex);
    QFETCH(int, numShards);
    QFETCH(QList<int>, images);

    const Dataset data = readIdx(path(QStringLiteral("images.idx")).toStdString(),
                                 path(QStringLiteral("labels.idx")).toStdString(), shardIndex, numShards);
    QCOMPARE(data.size(), images.size());
    QCOMPARE(data.featureDim(), 6);
    // Counted over the whole file, so every shard agrees.
    QCOMPARE(data.numClasses, 3);
    for (int row = 0; row < images.size(); ++row) {
        const int image = images[row];
        QCOMPARE(data.targets(row, 0), float(image % 3));
        for (int p = 0; p < 6; ++p)
            QCOMPARE(data.features(row, p), float(10 * image + p) / 255.0f);
    }
}

void TestDatasets::badIdxIsRejectedWithTheReason_data()
{
    QTest::addColumn<QByteArray>("images");
    QTest::addColumn<QByteArray>("labels");
    QTest::addColumn<QString>("messagePart");

    const QByteArray good = idxImages(5, 3, 2);
    QTest::newRow("wrong magic") << idxImages(5, 3, 2, 0x00000903) << idxLabels(5)
                                 << QStringLiteral("magic number is 0x00000903, expected 0x00000803");
    QTest::newRow("images and labels swapped") << idxLabels(5) << good << QStringLiteral("swapped");
    QTest::newRow("truncated images") << good.left(good.size() - 3) << idxLabels(5) << QStringLiteral("truncated");
    QTest::newRow("truncated header") << good.left(10) << idxLabels(5) << QStringLiteral("truncated");
    QTest::newRow("extra bytes") << good + "xx" << idxLabels(5) << QStringLiteral("extra bytes");
    QTest::newRow("count mismatch") << good << idxLabels(4) << QStringLiteral("has 5 images but");
    QTest::newRow("empty file") << QByteArray() << idxLabels(5) << QStringLiteral("too short");
    QTest::newRow("more shards than images") << idxImages(1, 3, 2) << idxLabels(1) << QStringLiteral("too few");
}

void TestDatasets::badIdxIsRejectedWithTheReason()
{
    QFETCH(QByteArray, images);
    QFETCH(QByteArray, labels);
    QFETCH(QString, messagePart);
    const QString imagesPath = path(QStringLiteral("bad-images.idx"));
    writeFile(imagesPath, images);
    writeFile(path(QStringLiteral("bad-labels.idx")), labels);

    const QString message = messageOf(
        [&] { readIdx(imagesPath.toStdString(), path(QStringLiteral("bad-labels.idx")).toStdString(), 1, 2); });
    QVERIFY2(message.contains(messagePart), qPrintable(message));
    QVERIFY2(message.contains(QLatin1String("bad-")), qPrintable(message));
}

void TestDatasets::csvIsRead_data()
{
    QTest::addColumn<QByteArray>("contents");
    QTest::addColumn<bool>("classification");
    QTest::addColumn<QList<float>>("firstRow");
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("numClasses");

    QTest::newRow("regression with header")
        << QByteArray("x1,x2,y\n1,2,3\n4,5,6\n") << false << QList<float>{1, 2, 3} << 2 << 0;
    QTest::newRow("regression without header")
        << QByteArray("1.5,-2e1,3\n4,5,6\n7,8,9\n") << false << QList<float>{1.5f, -20, 3} << 3 << 0;
    QTest::newRow("spaces, CRLF, blank lines, byte order mark")
        << QByteArray("\xEF\xBB\xBF x , y \r\n\r\n 0.5 ,  +7 \r\n\n1,2\r\n") << false << QList<float>{0.5f, 7} << 2
        << 0;
    QTest::newRow("classes counted from 0")
        << QByteArray("a,b,label\n1,1,0\n2,2,4\n3,3,1.0\n") << true << QList<float>{1, 1, 0} << 3 << 5;
}

void TestDatasets::csvIsRead()
{
    QFETCH(QByteArray, contents);
    QFETCH(bool, classification);
    QFETCH(QList<float>, firstRow);
    QFETCH(int, rows);
    QFETCH(int, numClasses);
    const QString file = path(QStringLiteral("good.csv"));
    writeFile(file, contents);

    const Dataset data = readCsv(file.toStdString(), classification, 0, 1);
    QCOMPARE(data.size(), rows);
    QCOMPARE(data.featureDim(), firstRow.size() - 1);
    QCOMPARE(data.numClasses, numClasses);
    for (int c = 0; c + 1 < firstRow.size(); ++c)
        QCOMPARE(data.features(0, c), firstRow[c]);
    QCOMPARE(data.targets(0, 0), firstRow.last());
}

void TestDatasets::csvShardTakesEveryNthRow()
{
    const QString file = path(QStringLiteral("shards.csv"));
    writeFile(file, "f,t\n0,0\n1,1\n2,2\n3,1\n4,0\n5,1\n6,2\n");
    const Dataset shard = readCsv(file.toStdString(), true, 1, 3);
    QCOMPARE(shard.size(), 2);
    QCOMPARE(shard.features(0, 0), 1.0f);
    QCOMPARE(shard.features(1, 0), 4.0f);
    // Every shard sees the whole file's class count, though this one has no class 2.
    QCOMPARE(shard.numClasses, 3);
}

void TestDatasets::badCsvIsRejectedNamingTheLine_data()
{
    QTest::addColumn<QByteArray>("contents");
    QTest::addColumn<bool>("classification");
    QTest::addColumn<QString>("messagePart");

    QTest::newRow("wrong column count") << QByteArray("a,b,c,y\n1,2,3,4\n1,2,3\n") << false
                                        << QStringLiteral("line 3 has 3 columns, expected 4");
    QTest::newRow("not a number") << QByteArray("1,2,3\n4,abc,6\n") << false
                                  << QStringLiteral("line 2, column 2: 'abc' is not a number");
    QTest::newRow("line numbers count blank lines")
        << QByteArray("x,y\n\n1,2\n3,4x\n") << false << QStringLiteral("line 4, column 2: '4x' is not a number");
    QTest::newRow("empty cell") << QByteArray("1,2\n,3\n") << false << QStringLiteral("line 2, column 1");
    QTest::newRow("empty cell in the first row")
        << QByteArray("1,,3\n4,5,6\n") << false << QStringLiteral("line 1, column 2: the cell is empty");
    QTest::newRow("not finite") << QByteArray("1,2\ninf,3\n") << false << QStringLiteral("not a finite number");
    QTest::newRow("negative class") << QByteArray("x,label\n1,0\n2,-1\n") << true
                                    << QStringLiteral("line 3, column 2: the class index '-1'");
    QTest::newRow("fractional class") << QByteArray("1,0\n2,1.5\n") << true << QStringLiteral("line 2, column 2");
    QTest::newRow("one column") << QByteArray("1\n2\n") << false << QStringLiteral("line 1 has 1 column");
    QTest::newRow("empty file") << QByteArray() << false << QStringLiteral("empty");
    QTest::newRow("header only") << QByteArray("x,y\n\n") << false << QStringLiteral("no data rows");
}

void TestDatasets::badCsvIsRejectedNamingTheLine()
{
    QFETCH(QByteArray, contents);
    QFETCH(bool, classification);
    QFETCH(QString, messagePart);
    const QString file = path(QStringLiteral("bad.csv"));
    writeFile(file, contents);

    const QString message = messageOf([&] { readCsv(file.toStdString(), classification, 0, 1); });
    QVERIFY2(message.contains(messagePart), qPrintable(message));
    QVERIFY2(message.contains(file), qPrintable(message));
}

void TestDatasets::loadDatasetParsesSpecs_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<bool>("classification");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("featureDim");
    QTest::addColumn<int>("numClasses");

    QTest::newRow("empty picks linear for regression") << QString() << false << 100 << 1 << 0;
    QTest::newRow("empty picks blobs for classification") << QString() << true << 100 << 2 << 10;
    QTest::newRow("linear") << QStringLiteral("linear") << false << 100 << 1 << 0;
    QTest::newRow("blobs:K:D") << QStringLiteral("blobs:4:7") << true << 100 << 7 << 4;
    QTest::newRow("mnist:DIR") << QStringLiteral("mnist:$DIR/mnist") << true << 7 << 16 << 3;
    QTest::newRow("idx:IMAGES,LABELS") << QStringLiteral("idx:$DIR/images.idx,$DIR/labels.idx") << true << 5 << 6 << 3;
    QTest::newRow("csv:PATH regression") << QStringLiteral("csv:$DIR/regression.csv") << false << 3 << 2 << 0;
    QTest::newRow("csv:PATH classification") << QStringLiteral("csv:$DIR/classes.csv") << true << 3 << 2 << 5;
}

void TestDatasets::loadDatasetParsesSpecs()
{
    QFETCH(QString, spec);
    QFETCH(bool, classification);
    QFETCH(int, size);
    QFETCH(int, featureDim);
    QFETCH(int, numClasses);
    DatasetOptions options = optionsFor(expand(spec));
    options.classification = classification;
    const Dataset data = loadDataset(options);
    QCOMPARE(data.size(), size);
    QCOMPARE(data.featureDim(), featureDim);
    QCOMPARE(data.numClasses, numClasses);
    QCOMPARE(data.targets.rows(), size);
    QVERIFY(!data.description.empty());
}

void TestDatasets::loadDatasetRejectsBadSpecs_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<int>("shardIndex");
    QTest::addColumn<int>("numShards");
    QTest::addColumn<QString>("messagePart");

    QTest::newRow("unknown spec lists the valid forms")
        << QStringLiteral("imagenet") << 0 << 1
        << QStringLiteral("linear, blobs, blobs:K:D, lowrank:ROWS:COLS:RANK[:NOISE], mnist:DIR");
    QTest::newRow("blobs without numbers") << QStringLiteral("blobs:ten:2") << 0 << 1 << QStringLiteral("blobs:K:D");
    QTest::newRow("blobs with one class") << QStringLiteral("blobs:1:2") << 0 << 1 << QStringLiteral("classes");
    QTest::newRow("lowrank with words") << QStringLiteral("lowrank:50:fifty:3") << 0 << 1
                                        << QStringLiteral("lowrank:ROWS:COLS:RANK[:NOISE]");
    QTest::newRow("lowrank of too high a rank")
        << QStringLiteral("lowrank:4:5:6") << 0 << 1 << QStringLiteral("at most the smaller side");
    QTest::newRow("lowrank with negative noise")
        << QStringLiteral("lowrank:4:5:2:-1") << 0 << 1 << QStringLiteral("0 or more");
    QTest::newRow("idx with one file") << QStringLiteral("idx:$DIR/images.idx") << 0 << 1
                                       << QStringLiteral("idx:IMAGES,LABELS");
    QTest::newRow("missing csv") << QStringLiteral("csv:$DIR/nope.csv") << 0 << 1 << QStringLiteral("does not exist");
    QTest::newRow("missing mnist") << QStringLiteral("mnist:$DIR") << 0 << 1
                                   << QStringLiteral("train-images-idx3-ubyte' does not exist");
    QTest::newRow("shard index out of range") << QStringLiteral("linear") << 2 << 2 << QStringLiteral("0 to 1");
    QTest::newRow("no shards") << QStringLiteral("linear") << 0 << 0 << QStringLiteral("at least 1");
}

void TestDatasets::loadDatasetRejectsBadSpecs()
{
    QFETCH(QString, spec);
    QFETCH(int, shardIndex);
    QFETCH(int, numShards);
    QFETCH(QString, messagePart);
    const QString message = messageOf([&] { loadDataset(optionsFor(expand(spec), shardIndex, numShards)); });
    QVERIFY2(message.contains(messagePart), qPrintable(message));
}

void TestDatasets::defaultDatasetMatchesTheModel()
{
    QCOMPARE(defaultDatasetFor("linear"), std::string("linear"));
    QCOMPARE(defaultDatasetFor("softmax"), std::string("blobs"));
    QCOMPARE(defaultDatasetFor("mlp"), std::string("blobs"));
    QCOMPARE(defaultDatasetFor("mlp:64"), std::string("blobs"));
    QCOMPARE(defaultDatasetFor("mf"), std::string("lowrank"));
    QCOMPARE(defaultDatasetFor("mf:5"), std::string("lowrank"));
    QVERIFY_THROWS_EXCEPTION(InputError, defaultDatasetFor("perceptron"));
    QVERIFY_THROWS_EXCEPTION(InputError, defaultDatasetFor("mlp:0"));
}

void TestDatasets::hugeSyntheticShardsAreRefusedBeforeAllocating()
{
    // Each would take from gigabytes to exabytes; the refusal must come at
    // once, naming the flag to lower, not from the OOM killer.
    const struct
    {
        const char *spec;
        int64_t samples;
    } cases[] = {{"blobs:10:100000", 100000}, {"linear", int64_t(1) << 40}, {"blobs", int64_t(1) << 60}};
    for (const auto &c : cases) {
        DatasetOptions options = optionsFor(QString::fromLatin1(c.spec));
        options.samplesPerShard = c.samples;
        const QString message = messageOf([&] { loadDataset(options); });
        QVERIFY2(message.contains(QStringLiteral("--samples_per_shard")) && message.contains(QStringLiteral("MB")),
                 qPrintable(message));
    }
    // A large but sensible shard (MNIST-sized rows) still loads.
    DatasetOptions fits = optionsFor(QStringLiteral("blobs:10:784"));
    fits.samplesPerShard = 1000;
    QCOMPARE(loadDataset(fits).size(), 1000);
}

namespace {

// A row's values as text, to find it in another set: every row of the
// datasets below is unique.
std::vector<std::string> rowKeys(const Dataset &data)
{
    std::vector<std::string> keys;
    for (Eigen::Index r = 0; r < data.size(); ++r) {
        std::string key;
        for (Eigen::Index c = 0; c < data.featureDim(); ++c)
            key += std::to_string(data.features(r, c)) + ",";
        keys.push_back(key + std::to_string(data.targets(r, 0)));
    }
    return keys;
}

} // namespace

void TestDatasets::evalFractionHoldsOutTheSameRowsFromEveryShard_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<int>("totalRows"); // the whole dataset: every shard and the held-out rows
    // 101 rows x,y = i,2i: none equal.
    QString csv = QStringLiteral("x,y\n");
    for (int i = 0; i < 101; ++i)
        csv += QStringLiteral("%1,%2\n").arg(i).arg(2 * i);
    writeFile(path(QStringLiteral("rows.csv")), csv.toUtf8());
    QTest::newRow("csv, 3 workers") << QStringLiteral("csv:$DIR/rows.csv") << 101;
    QTest::newRow("linear, 3 workers of 100") << QStringLiteral("linear") << 300;
    QTest::newRow("blobs, 3 workers of 100") << QStringLiteral("blobs:3:4") << 300;
}

void TestDatasets::evalFractionHoldsOutTheSameRowsFromEveryShard()
{
    QFETCH(QString, spec);
    QFETCH(int, totalRows);
    DatasetOptions options = optionsFor(expand(spec), 0, 3);
    options.evalFraction = 0.2;
    options.seed = 7;
    options.classification = spec.startsWith(QLatin1String("blobs"));

    const Dataset heldOut = loadHeldOutData(options, {});
    QCOMPARE(heldOut.size(), int64_t(std::llround(0.2 * totalRows)));
    std::set<std::string> heldOutKeys;
    for (const auto &key : rowKeys(heldOut))
        heldOutKeys.insert(key);
    QCOMPARE(int64_t(heldOutKeys.size()), heldOut.size());

    int64_t trained = 0;
    for (int shard = 0; shard < 3; ++shard) {
        options.shardIndex = shard;
        const Dataset data = loadDataset(options);
        trained += data.size();
        for (const auto &key : rowKeys(data))
            QVERIFY2(!heldOutKeys.count(key),
                     ("shard " + std::to_string(shard) + " trains on held-out row " + key).c_str());
        // Every worker computes the same held-out rows on its own.
        QCOMPARE(rowKeys(loadHeldOutData(options, {})), rowKeys(heldOut));
    }
    // Every row is trained on by one worker or held out: none is lost.
    QCOMPARE(trained + heldOut.size(), int64_t(totalRows));
}

void TestDatasets::evalFractionSpreadsOverAClassSortedFile()
{
    // 50 rows of class 0, then 50 of class 1: a held-out set of one class
    // would score nothing a user wants to know.
    QString csv;
    for (int i = 0; i < 100; ++i)
        csv += QStringLiteral("%1,%2\n").arg(i).arg(i < 50 ? 0 : 1);
    writeFile(path(QStringLiteral("sorted.csv")), csv.toUtf8());
    DatasetOptions options = optionsFor(QStringLiteral("csv:") + path(QStringLiteral("sorted.csv")));
    options.classification = true;
    options.evalFraction = 0.2;
    const Dataset heldOut = loadHeldOutData(options, {});
    QCOMPARE(heldOut.size(), int64_t(20));
    const auto ones = (heldOut.targets.array() == 1.0f).count();
    QVERIFY2(ones >= 4 && ones <= 16, qPrintable(QStringLiteral("%1 of 20 held-out rows are class 1").arg(ones)));
    QCOMPARE(heldOut.numClasses, int64_t(2));
}

void TestDatasets::evalDatasetIsAFileWholeOrADrawNoWorkerHas()
{
    DatasetOptions options = optionsFor(QStringLiteral("linear"), 1, 2);
    // A file: every row, whatever this worker's shard.
    const Dataset file = loadHeldOutData(options, "csv:" + path(QStringLiteral("regression.csv")).toStdString());
    QCOMPARE(file.size(), int64_t(3));
    // Synthetic: the same problem, but samples no shard holds.
    const Dataset drawn = loadHeldOutData(options, "linear");
    QCOMPARE(drawn.size(), options.samplesPerShard);
    const auto [slope, intercept] = fitLine(drawn);
    QVERIFY(std::abs(slope - 2.0) < 0.3 && std::abs(intercept - 10.0) < 0.3);
    for (int shard = 0; shard < 2; ++shard) {
        options.shardIndex = shard;
        QVERIFY(loadDataset(options).features != drawn.features);
    }
}

void TestDatasets::badHeldOutDataIsRefusedSayingWhatToDo_data()
{
    QTest::addColumn<QString>("spec");
    QTest::addColumn<double>("fraction");
    QTest::addColumn<QString>("evalSpec");
    QTest::addColumn<QString>("expected");
    QTest::newRow("fraction 0") << QStringLiteral("linear") << 0.0 << QString()
                                << QStringLiteral("give --eval_dataset=SPEC or --eval_fraction=F");
    QTest::newRow("fraction 1") << QStringLiteral("linear") << 1.0 << QString()
                                << QStringLiteral("--eval_fraction=1: must be more than 0 and less than 1");
    QTest::newRow("too small for the data")
        << QStringLiteral("csv:$DIR/regression.csv") << 0.1 << QString()
        << QStringLiteral("--eval_fraction=0.1 of 3 samples holds out none: give a larger fraction or more data");
    QTest::newRow("holds out every row")
        << QStringLiteral("csv:$DIR/regression.csv") << 0.9 << QString()
        << QStringLiteral("holds out every one, leaving none to train on: give a smaller fraction");
    QTest::newRow("empty eval file") << QStringLiteral("linear") << 0.0 << QStringLiteral("csv:$DIR/header-only.csv")
                                     << QStringLiteral("the file has a header but no data rows");
}

void TestDatasets::badHeldOutDataIsRefusedSayingWhatToDo()
{
    QFETCH(QString, spec);
    QFETCH(double, fraction);
    QFETCH(QString, evalSpec);
    QFETCH(QString, expected);
    writeFile(path(QStringLiteral("header-only.csv")), "x,y\n");
    DatasetOptions options = optionsFor(expand(spec));
    options.evalFraction = fraction;
    const QString message = messageOf([&] { loadHeldOutData(options, expand(evalSpec).toStdString()); });
    QVERIFY2(message.contains(expected), qPrintable(message));
    if (evalSpec.isEmpty() && fraction > 0) // the workers refuse the same split
        QVERIFY2(messageOf([&] { loadDataset(options); }).contains(expected), qPrintable(message));
}

QTEST_GUILESS_MAIN(TestDatasets)
#include "tst_datasets.moc"
