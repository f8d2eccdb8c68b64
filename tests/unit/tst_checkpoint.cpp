#include "base/error.h"
#include "formats/checkpoint.h"
#include "support/input_error_checks.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <zlib.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <vector>

using namespace parasync;
using namespace parasync::testing;
using namespace Qt::StringLiterals;

namespace {

// The linear demo's state after `step` steps on one ps, with an Adagrad slot.
proto::Checkpoint makeCheckpoint(int64_t step)
{
    proto::Checkpoint checkpoint;
    checkpoint.set_global_step(step);
    checkpoint.set_wall_time(1.7e9 + double(step));
    checkpoint.mutable_signature()->set_model("linear");
    checkpoint.mutable_signature()->set_feature_dim(1);
    checkpoint.mutable_signature()->set_output_dim(1);
    checkpoint.mutable_signature()->set_optimizer("adagrad");
    checkpoint.mutable_mode()->set_mode(proto::SSP);
    checkpoint.mutable_mode()->set_staleness(10);
    proto::ShardState *shard = checkpoint.add_shards();
    shard->set_ps_index(0);
    for (const char *name : {"w", "b"}) {
        proto::VariableState *variable = shard->add_variables();
        variable->set_name(name);
        variable->mutable_value()->add_shape(1);
        variable->mutable_value()->add_values(float(step) / 100.0f);
        proto::Tensor &slot = (*variable->mutable_slots())["accumulator"];
        slot.add_shape(1);
        slot.add_values(0.1f + float(step));
        variable->set_update_count(step);
    }
    return checkpoint;
}

// A model of two variables and two embedding tables (rows of 16 floats and
// of 3, Adagrad's accumulator beside each), `rows` rows each.
proto::Checkpoint sparseCheckpoint(int64_t rows)
{
    proto::Checkpoint checkpoint;
    checkpoint.set_global_step(7000);
    checkpoint.mutable_signature()->set_model("sparse_lr");
    checkpoint.mutable_signature()->set_optimizer("adagrad");
    for (const char *name : {"bias", "scale"}) {
        proto::VariableState *variable = checkpoint.add_variables();
        variable->set_name(name);
        variable->mutable_value()->add_shape(64);
        for (int i = 0; i < 64; ++i)
            variable->mutable_value()->add_values(float(i) / 3);
    }
    for (const auto &[name, width] : {std::pair{"fields", 16}, std::pair{"factors", 3}}) {
        proto::TableState *table = checkpoint.add_tables();
        table->set_name(name);
        table->add_slot_names("accumulator");
        table->mutable_ids()->Reserve(int(rows));
        table->mutable_values()->Resize(int(rows * width), 0.0f);
        table->mutable_slots()->Resize(int(rows * width), 0.0f);
        for (int64_t r = 0; r < rows; ++r) {
            table->add_ids(uint64_t(r) * 11 + 5);
            for (int c = 0; c < width; ++c) {
                table->set_values(int(r * width + c), float(r % 1000) + float(c) / 16);
                table->set_slots(int(r * width + c), 0.1f + float(c));
            }
        }
    }
    return checkpoint;
}

std::string littleEndian64(uint64_t value)
{
    std::string bytes;
    for (int i = 0; i < 8; ++i, value >>= 8)
        bytes.push_back(char(value & 0xff));
    return bytes;
}

std::string sha256(const std::string &bytes)
{
    return QCryptographicHash::hash(QByteArray::fromStdString(bytes), QCryptographicHash::Sha256).toStdString();
}

// A count or a length and its CRC-32.
std::string checked(uint64_t value)
{
    const std::string bytes = littleEndian64(value);
    uint32_t crc = uint32_t(::crc32(0, reinterpret_cast<const Bytef *>(bytes.data()), uInt(bytes.size())));
    std::string withCrc = bytes;
    for (int i = 0; i < 4; ++i, crc >>= 8)
        withCrc.push_back(char(crc & 0xff));
    return withCrc;
}

// A version 2 file of these pieces (serialized), framed and checksummed as
// a writer would, whatever the pieces hold.
std::string version2Of(const std::vector<std::string> &pieces, uint64_t count = 0)
{
    std::string bytes = "PSYNCKP2" + checked(count > 0 ? count : pieces.size());
    for (const std::string &piece : pieces)
        bytes += checked(piece.size()) + piece;
    return bytes + sha256(bytes);
}

QByteArray readAll(const std::string &path)
{
    QFile file(QString::fromStdString(path));
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return file.readAll();
}

void writeAll(const std::string &path, const QByteArray &bytes)
{
    QFile file(QString::fromStdString(path));
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(file.write(bytes), bytes.size());
}

QStringList fileNames(const QString &directory)
{
    return QDir(directory).entryList(QDir::Files | QDir::Hidden, QDir::Name);
}

QString name(const std::string &path)
{
    return QFileInfo(QString::fromStdString(path)).fileName();
}

} // namespace

class TestCheckpoint : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // Checkpoints before partitioned variables held one shard per ps task
    // (variable i on shard i % shards); they restore as whole variables in
    // the model's order, as the new ones hold them.
    void olderCheckpointsShardsReadAsWholeVariables()
    {
        proto::Checkpoint old;
        for (const char *name : {"w", "b", "c"})
            old.mutable_signature()->add_variables()->set_name(name);
        for (int k = 0; k < 2; ++k)
            old.add_shards()->set_ps_index(k);
        old.mutable_shards(0)->add_variables()->set_name("w");
        old.mutable_shards(1)->add_variables()->set_name("b");
        old.mutable_shards(0)->add_variables()->set_name("c");
        std::vector<std::string> names;
        for (const auto &variable : checkpointVariables(old))
            names.push_back(variable.name());
        QCOMPARE(names, (std::vector<std::string>{"w", "b", "c"}));
        // A damaged shard index lands nowhere rather than on another
        // variable's place: "b" is missing (and the chief refuses the file).
        old.mutable_shards(1)->set_ps_index(-2147483647);
        names.clear();
        for (const auto &variable : checkpointVariables(old))
            names.push_back(variable.name());
        QCOMPARE(names, (std::vector<std::string>{"w", "", "c"}));

        proto::Checkpoint current;
        for (const char *name : {"W", "b"})
            current.add_variables()->set_name(name);
        names.clear();
        for (const auto &variable : checkpointVariables(current))
            names.push_back(variable.name());
        QCOMPARE(names, (std::vector<std::string>{"W", "b"}));
    }

    // Version 2: the magic, the number of pieces, each piece's length and
    // bytes (each number with its CRC-32), the SHA-256 of all before it; the
    // first piece all but the variables and the rows.
    void framingIsMagicPiecesChecksum()
    {
        const proto::Checkpoint checkpoint = sparseCheckpoint(10);
        const std::string bytes = serializeCheckpoint(checkpoint);
        QCOMPARE(bytes.substr(0, 8), std::string("PSYNCKP2"));
        // The first piece, one of variables, one of each table's rows.
        QCOMPARE(bytes.substr(8, 12), checked(4));
        uint64_t length = 0;
        for (int i = 7; i >= 0; --i)
            length = (length << 8) | static_cast<unsigned char>(bytes[20 + size_t(i)]);
        QCOMPARE(bytes.substr(20, 12), checked(length));
        proto::Checkpoint first;
        QVERIFY(first.ParseFromString(bytes.substr(32, length)));
        QCOMPARE(first.global_step(), int64_t(7000));
        QCOMPARE(first.variables_size(), 0);
        QCOMPARE(first.tables_size(), 2);
        QCOMPARE(first.tables(1).name(), std::string("factors"));
        QCOMPARE(first.tables(1).slot_names(0), std::string("accumulator"));
        QCOMPARE(first.tables(1).ids_size(), 0);
        QCOMPARE(bytes.substr(bytes.size() - 32), sha256(bytes.substr(0, bytes.size() - 32)));
        QVERIFY(parseCheckpointBytes(bytes, "mem").SerializeAsString() == checkpoint.SerializeAsString());
    }

    // Cut into pieces of any size, a checkpoint reads back the same bytes.
    void cutAtAnyPieceSizeItReadsBackTheSame_data()
    {
        QTest::addColumn<qint64>("pieceBytes");
        QTest::addColumn<int>("atLeastPieces");
        QTest::newRow("a row a piece") << qint64(1) << 1 + 2 + 2 * 300;
        QTest::newRow("a few rows a piece") << qint64(1000) << 1 + 2 + 2 * 300 * 3 * 4 / 1000;
        QTest::newRow("all variables in one piece, a table a piece") << qint64(kCheckpointPieceBytes) << 4;
    }
    void cutAtAnyPieceSizeItReadsBackTheSame()
    {
        QFETCH(qint64, pieceBytes);
        QFETCH(int, atLeastPieces);
        const proto::Checkpoint checkpoint = sparseCheckpoint(300);
        const std::string bytes = serializeCheckpoint(checkpoint, pieceBytes);
        uint64_t pieces = 0;
        for (int i = 7; i >= 0; --i)
            pieces = (pieces << 8) | static_cast<unsigned char>(bytes[8 + size_t(i)]);
        QVERIFY2(pieces >= uint64_t(atLeastPieces), qPrintable(QString::number(pieces)));
        QVERIFY(parseCheckpointBytes(bytes, "mem").SerializeAsString() == checkpoint.SerializeAsString());
    }

    // What releases before pieces wrote: one message, its length before it.
    void version1FilesAreStillRead()
    {
        const proto::Checkpoint checkpoint = sparseCheckpoint(20);
        const std::string payload = checkpoint.SerializeAsString();
        const std::string bytes = "PSYNCKP1" + littleEndian64(payload.size()) + payload + sha256(payload);
        QVERIFY(parseCheckpointBytes(bytes, "mem").SerializeAsString() == payload);
        std::string flipped = bytes;
        flipped[40] = char(flipped[40] ^ 1);
        verifyMentions(inputErrorOf([&] { parseCheckpointBytes(flipped, "old.pckpt"); }),
                       {u"old.pckpt: checksum mismatch"_s});
    }

    // Protobuf holds no message past 2 GiB: a checkpoint's rows past that
    // were a file that could not be written. In pieces they are written and
    // read, every row. (Some 2.2 GB in memory twice, and on disk.)
    void aCheckpointPastTwoGibibytesIsWrittenAndReadBack()
    {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
        QSKIP("2.2 GB twice, and a sanitizer's shadow memory beside it; one thread, no race to find");
#endif
        // 16M rows of 16 floats and Adagrad's 16, and their ids: 2.2 GB.
        const int64_t rows = 16'000'000;
        proto::Checkpoint checkpoint;
        checkpoint.set_global_step(9);
        checkpoint.mutable_signature()->set_model("sparse_lr");
        proto::TableState *table = checkpoint.add_tables();
        table->set_name("fields");
        table->add_slot_names("accumulator");
        table->mutable_ids()->Resize(int(rows), 0);
        table->mutable_values()->Resize(int(rows * 16), 0.0f);
        table->mutable_slots()->Resize(int(rows * 16), 0.5f);
        for (int64_t r = 0; r < rows; ++r) {
            table->set_ids(int(r), uint64_t(r) * 3 + 1);
            table->set_values(int(r * 16 + r % 16), float(r));
        }
        QVERIFY(checkpoint.ByteSizeLong() > size_t(std::numeric_limits<int32_t>::max()));

        QTemporaryDir dir;
        CheckpointStore store(dir.path().toStdString(), 1);
        const std::string path = store.save(std::move(checkpoint));
        QVERIFY(QFileInfo(QString::fromStdString(path)).size() > std::numeric_limits<int32_t>::max());

        const auto found = store.newestValid();
        QVERIFY(found);
        const proto::TableState &read = found->checkpoint.tables(0);
        QCOMPARE(read.ids_size(), int(rows));
        QCOMPARE(read.values_size(), int(rows * 16));
        QCOMPARE(read.slots_size(), int(rows * 16));
        for (int64_t r = 0; r < rows; r += 9973) {
            QCOMPARE(read.ids(int(r)), uint64_t(r) * 3 + 1);
            QCOMPARE(read.values(int(r * 16 + r % 16)), float(r));
        }
        QCOMPARE(read.ids(int(rows - 1)), uint64_t(rows - 1) * 3 + 1);
        QCOMPARE(read.slots(int(rows * 16 - 1)), 0.5f);
    }

    void savedCheckpointLoadsBackWhole()
    {
        QTemporaryDir dir;
        CheckpointStore store(dir.path().toStdString(), 5);
        const std::string path = store.save(makeCheckpoint(200));
        QCOMPARE(name(path), u"model.ckpt-200.pckpt"_s);
        const proto::Checkpoint read = readCheckpointFile(path);
        QCOMPARE(read.global_step(), int64_t(200));
        QCOMPARE(read.signature().optimizer(), std::string("adagrad"));
        QCOMPARE(read.mode().mode(), proto::SSP);
        QCOMPARE(read.shards(0).variables(1).name(), std::string("b"));
        QCOMPARE(read.shards(0).variables(0).slots().at("accumulator").values(0), 200.1f);
        QCOMPARE(read.SerializeAsString(), makeCheckpoint(200).SerializeAsString());
    }

    void newestValidIsTheHighestStepNotTheLastWritten()
    {
        QTemporaryDir dir;
        CheckpointStore store(dir.path().toStdString(), 0);
        for (int64_t step : {100, 1000, 900})
            store.save(makeCheckpoint(step));
        std::vector<std::string> skipped;
        const auto found = store.newestValid(&skipped);
        QVERIFY(found);
        QCOMPARE(found->checkpoint.global_step(), int64_t(1000));
        QCOMPARE(name(found->path), u"model.ckpt-1000.pckpt"_s);
        QVERIFY(skipped.empty());
        // Ordered by step, not by name ("1000" < "900" as text).
        const auto files = store.list();
        QCOMPARE(files.size(), size_t(3));
        QCOMPARE(name(files[1]), u"model.ckpt-900.pckpt"_s);
    }

    void emptyOrMissingDirectoryHasNoCheckpoint()
    {
        QTemporaryDir dir;
        QVERIFY(!CheckpointStore(dir.path().toStdString()).newestValid());
        QVERIFY(CheckpointStore(dir.filePath(u"missing"_s).toStdString()).list().empty());
    }

    void saveCreatesTheDirectoryAndLeavesNoTemporary()
    {
        QTemporaryDir dir;
        const QString logdir = dir.filePath(u"runs/a"_s);
        CheckpointStore store(logdir.toStdString(), 5);
        store.save(makeCheckpoint(10));
        store.save(makeCheckpoint(20));
        QCOMPARE(fileNames(logdir), (QStringList{u"model.ckpt-10.pckpt"_s, u"model.ckpt-20.pckpt"_s}));
    }

    void saveIntoUnwritablePlaceNamesIt()
    {
        QTemporaryDir dir;
        const std::string file = dir.filePath(u"plain-file"_s).toStdString();
        writeAll(file, "x");
        CheckpointStore store(file + "/logdir", 5);
        verifyMentions(inputErrorOf([&] { store.save(makeCheckpoint(1)); }),
                       {QString::fromStdString(file + "/logdir"), u"cannot create"_s});
    }

    void leftoverTemporaryFromACrashIsIgnored()
    {
        QTemporaryDir dir;
        CheckpointStore store(dir.path().toStdString(), 5);
        store.save(makeCheckpoint(100));
        store.save(makeCheckpoint(200));
        // A chief killed half-way through writing step 300.
        const std::string bytes = serializeCheckpoint(makeCheckpoint(300));
        const std::string crashed = dir.filePath(u".model.ckpt-300.pckpt.tmp-4242"_s).toStdString();
        writeAll(crashed, QByteArray::fromStdString(bytes.substr(0, bytes.size() / 2)));

        std::vector<std::string> skipped;
        const auto found = store.newestValid(&skipped);
        QVERIFY(found);
        QCOMPARE(found->checkpoint.global_step(), int64_t(200));
        QVERIFY(skipped.empty());
        QCOMPARE(store.list().size(), size_t(2));
        // Newer than the newest valid checkpoint: it may still be being written.
        QVERIFY(QFile::exists(QString::fromStdString(crashed)));
    }

    void staleTemporaryIsRemoved()
    {
        QTemporaryDir dir;
        CheckpointStore store(dir.path().toStdString(), 5);
        const std::string older = dir.filePath(u".model.ckpt-150.pckpt.tmp-4242"_s).toStdString();
        writeAll(older, "half a checkpoint");
        store.save(makeCheckpoint(100));
        store.save(makeCheckpoint(200));
        const std::string lowerStep = dir.filePath(u".model.ckpt-50.pckpt.tmp-4243"_s).toStdString();
        writeAll(lowerStep, "half a checkpoint");
        const std::string unrelated = dir.filePath(u".notes.tmp-1"_s).toStdString();
        writeAll(unrelated, "mine");
        // Written before the newest valid checkpoint, by mtime.
        std::filesystem::last_write_time(older, std::filesystem::last_write_time(store.list().back())
                                                    - std::chrono::seconds(10));

        QVERIFY(store.newestValid());
        QVERIFY(!QFile::exists(QString::fromStdString(older)));
        QVERIFY(!QFile::exists(QString::fromStdString(lowerStep)));
        QVERIFY(QFile::exists(QString::fromStdString(unrelated)));
    }

    void keepsOnlyTheNewestMaxToKeep()
    {
        QTemporaryDir dir;
        CheckpointStore store(dir.path().toStdString(), 3);
        for (int64_t step = 100; step <= 600; step += 100)
            store.save(makeCheckpoint(step));
        QCOMPARE(fileNames(dir.path()),
                 (QStringList{u"model.ckpt-400.pckpt"_s, u"model.ckpt-500.pckpt"_s, u"model.ckpt-600.pckpt"_s}));

        QTemporaryDir all;
        CheckpointStore keepAll(all.path().toStdString(), 0);
        for (int64_t step = 1; step <= 7; ++step)
            keepAll.save(makeCheckpoint(step));
        QCOMPARE(keepAll.list().size(), size_t(7));
    }

    void corruptNewestFallsBackToPreviousAndSaysWhy_data()
    {
        QTest::addColumn<QString>("damage");
        QTest::addColumn<QStringList>("words");
        QTest::newRow("flipped payload byte") << "flip" << QStringList{u"checksum mismatch"_s};
        QTest::newRow("truncated") << "truncate" << QStringList{u"truncated: "_s, u" bytes"_s};
        QTest::newRow("wrong magic") << "magic" << QStringList{u"bad magic (not a Parasync checkpoint)"_s};
        QTest::newRow("empty file") << "empty" << QStringList{u"truncated: 0 of at least 48 bytes"_s};
        QTest::newRow("appended bytes") << "append" << QStringList{u"after the checksum"_s};
    }
    void corruptNewestFallsBackToPreviousAndSaysWhy()
    {
        QFETCH(QString, damage);
        QFETCH(QStringList, words);
        QTemporaryDir dir;
        CheckpointStore store(dir.path().toStdString(), 5);
        store.save(makeCheckpoint(100));
        const std::string newest = store.save(makeCheckpoint(200));

        QByteArray bytes = readAll(newest);
        const qsizetype size = bytes.size();
        if (damage == u"flip")
            bytes[20] = char(bytes[20] ^ 0x40);
        else if (damage == u"truncate")
            bytes.truncate(size - 10);
        else if (damage == u"magic")
            bytes.replace(0, 8, "PK\x03\x04xxxx");
        else if (damage == u"empty")
            bytes.clear();
        else if (damage == u"append")
            bytes.append("junk");
        writeAll(newest, bytes);

        const QString error = inputErrorOf([&] { readCheckpointFile(newest); });
        verifyMentions(error, QStringList{QString::fromStdString(newest)} + words);
        if (damage == u"truncate")
            verifyMentions(error, {QStringLiteral("truncated: %1 of %2 bytes").arg(size - 10).arg(size)});

        std::vector<std::string> skipped;
        const auto found = store.newestValid(&skipped);
        QVERIFY(found);
        QCOMPARE(found->checkpoint.global_step(), int64_t(100));
        QCOMPARE(skipped.size(), size_t(1));
        verifyMentions(QString::fromStdString(skipped.front()), QStringList{QString::fromStdString(newest)} + words);
        // Reported, never deleted: a person may want to look at it.
        QVERIFY(QFile::exists(QString::fromStdString(newest)));
    }

    void framingErrors_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("reason");
        const std::string good = serializeCheckpoint(makeCheckpoint(5));
        QTest::newRow("header only") << QByteArray::fromStdString(good.substr(0, 16))
                                     << QStringLiteral("truncated: 16 of at least 64 bytes");
        QTest::newRow("half the magic") << QByteArray("PSYN") << u"truncated: 4 of at least 48 bytes"_s;
        QTest::newRow("text file") << QByteArray("{\"global_step\": 5}") << u"bad magic"_s;
        QTest::newRow("impossible length")
            << QByteArray("PSYNCKP1\xff\xff\xff\xff\xff\xff\xff\xff", 16) << u"impossible"_s;

        // Correct framing and checksum around bytes that are not a Checkpoint.
        const std::string junk = "\xff\xff\xff\xff";
        const std::string sum
            = QCryptographicHash::hash(QByteArray::fromStdString(junk), QCryptographicHash::Sha256).toStdString();
        std::string framed = "PSYNCKP1";
        framed += char(junk.size());
        framed += std::string(7, '\0');
        framed += junk + sum;
        QTest::newRow("payload is not a checkpoint")
            << QByteArray::fromStdString(framed) << u"payload does not parse"_s;
    }
    // Pieces framed and checksummed right around what a writer never
    // writes: refused, saying which piece holds what.
    void piecesErrors_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("reason");
        const auto piece = [](const proto::Checkpoint &message) { return message.SerializeAsString(); };
        proto::Checkpoint first;
        first.set_global_step(10);
        first.add_tables()->set_name("fields");
        proto::Checkpoint rows;
        proto::TableState *table = rows.add_tables();
        table->set_name("fields");
        table->add_ids(4);
        table->add_values(1.0f);
        proto::Checkpoint otherTable = rows;
        otherTable.mutable_tables(0)->set_name("factors");
        proto::Checkpoint stepLater;
        stepLater.set_global_step(11);
        proto::Checkpoint twice = first;
        twice.add_tables()->set_name("fields");
        const auto framed = [](const std::string &bytes) { return QByteArray::fromStdString(bytes); };

        QTest::newRow("global step in a later piece")
            << framed(version2Of({piece(first), piece(stepLater)}))
            << u"piece 2 of 2 holds global_step, which only the first piece may"_s;
        QTest::newRow("rows of a table the first piece did not name")
            << framed(version2Of({piece(first), piece(otherTable)}))
            << u"piece 2 of 2: rows of table 'factors', which the first message did not name"_s;
        QTest::newRow("rows in the first piece")
            << framed(version2Of({piece(rows)})) << u"piece 1 holds rows of table 'fields'"_s;
        QTest::newRow("a table named twice") << framed(version2Of({piece(twice)})) << u"names table 'fields' twice"_s;
        QTest::newRow("rows out of id order")
            << framed(version2Of({piece(first), piece(rows), piece(rows)}))
            << u"piece 3 of 3: a piece of table 'fields' starting at id 4, not after the last id before it"_s;
        QTest::newRow("a piece that does not parse")
            << framed(version2Of({piece(first), "\xff\xff\xff"})) << u"piece 2 of 2 does not parse"_s;
        QTest::newRow("more pieces than the file holds")
            << framed(version2Of({piece(first)}, uint64_t(1) << 40)) << u"pieces is impossible"_s;
        QTest::newRow("a piece past the end") << framed(version2Of({piece(first)}, 5)) << QStringLiteral("truncated: ");
        std::string newer = version2Of({piece(first)});
        newer[7] = '3';
        QTest::newRow("a newer format") << framed(newer) << u"written by a newer Parasync (checkpoint format 3)"_s;
        std::string lengthFlipped = version2Of({piece(first)});
        lengthFlipped[27] = char(0x40);
        QTest::newRow("a piece's length damaged")
            << framed(lengthFlipped) << u"checksum mismatch (the file is corrupt: the length of piece 1 of 1"_s;
        std::string countFlipped = version2Of({piece(first)});
        countFlipped[9] = char(countFlipped[9] ^ 0x10);
        QTest::newRow("the piece count damaged")
            << framed(countFlipped) << u"checksum mismatch (the file is corrupt: its piece count"_s;
        proto::Checkpoint manyRows = rows;
        for (uint64_t id = 5; id < 40; ++id) {
            manyRows.mutable_tables(0)->add_ids(id);
            manyRows.mutable_tables(0)->add_values(float(id));
        }
        std::string cut = version2Of({piece(first), piece(manyRows)});
        cut.resize(cut.size() - 40);
        QTest::newRow("cut in its last piece")
            << framed(cut) << QStringLiteral("truncated: %1 of %2 bytes").arg(cut.size()).arg(cut.size() + 40);
    }
    void piecesErrors()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, reason);
        verifyMentions(inputErrorOf([&] { parseCheckpointBytes(bytes.toStdString(), "ckpt"); }), {u"ckpt: "_s, reason});
    }

    void framingErrors()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, reason);
        verifyMentions(inputErrorOf([&] { parseCheckpointBytes(bytes.toStdString(), "ckpt"); }), {u"ckpt: "_s, reason});
    }
};

QTEST_GUILESS_MAIN(TestCheckpoint)
#include "tst_checkpoint.moc"
