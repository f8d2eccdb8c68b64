// The Train stream's messages parsed into kept storage (wire/train_call.h):
// a push after a push reuses its tensors' memory, and whatever the bytes
// hold, the message ends up exactly as a fresh parse would make it.
#include "wire/train_call.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>

#include <QTest>

using namespace parasync;

namespace {

grpc::ByteBuffer bufferOf(const std::string &bytes)
{
    grpc::Slice slice(bytes);
    return grpc::ByteBuffer(&slice, 1);
}

proto::TrainRequest pushOf(std::vector<int> sizes, float value)
{
    proto::TrainRequest request;
    auto *push = request.mutable_push();
    push->set_computed_from_step(7);
    push->set_batch_loss(0.25f);
    for (const int size : sizes) {
        auto *gradient = push->add_gradients();
        gradient->add_shape(size);
        for (int i = 0; i < size; ++i)
            gradient->add_values(value + float(i));
    }
    return request;
}

proto::TrainRequest joinOf(int worker)
{
    proto::TrainRequest request;
    request.mutable_join()->set_worker_index(worker);
    return request;
}

// Field 15, varint 1: a field this version of the .proto does not have.
const std::string kUnknownField = std::string("\x78\x01", 2);

// Field `field` holding `body` (a message or a packed run), as protobuf writes it.
std::string lengthDelimited(int field, const std::string &body)
{
    std::string out;
    {
        google::protobuf::io::StringOutputStream stream(&out);
        google::protobuf::io::CodedOutputStream coded(&stream);
        coded.WriteTag(uint32_t(field) << 3 | 2);
        coded.WriteVarint32(uint32_t(body.size()));
    }
    return out + body;
}

// A push answer with `sizes` parameter tensors of values i / 3 + first.
proto::TrainResponse answerOf(std::vector<int> sizes, float first)
{
    proto::TrainResponse answer;
    auto *push = answer.mutable_push();
    push->set_global_step(41);
    push->set_outcome(proto::APPLIED);
    push->set_contributions(2);
    push->mutable_mode()->set_mode(proto::SSP);
    push->mutable_mode()->set_staleness(3);
    for (const int size : sizes) {
        auto *parameters = push->add_parameters();
        parameters->add_shape(size);
        for (int i = 0; i < size; ++i)
            parameters->add_values(float(i) / 3 + first);
    }
    return answer;
}

// The push answer's bytes with `tensors` (each a Tensor's bytes) as its
// parameters, after its other fields.
std::string answerBytes(const std::vector<std::string> &tensors)
{
    proto::TrainResponse head = answerOf({}, 0);
    std::string push = head.push().SerializeAsString();
    for (const std::string &tensor : tensors)
        push += lengthDelimited(proto::PushResponse::kParametersFieldNumber, tensor);
    return lengthDelimited(proto::TrainResponse::kPushFieldNumber, push);
}

std::string tensorBytes(int size, float first)
{
    return answerOf({size}, first).push().parameters(0).SerializeAsString();
}

// Rows of vectors sized as `sizes`, and their spans.
struct Destinations
{
    explicit Destinations(std::vector<int> sizes)
    {
        for (const int size : sizes)
            rows.emplace_back(size_t(size), -1.0f);
        for (auto &row : rows)
            spans.emplace_back(row);
    }
    std::vector<std::vector<float>> rows;
    TensorDestinations spans;
};

} // namespace

Q_DECLARE_METATYPE(std::string)

class TestTrainCall : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void aPushAfterAPushReusesItsTensorsStorage()
    {
        proto::TrainRequest kept;
        grpc::ByteBuffer first = bufferOf(pushOf({100000, 10}, 1.0f).SerializeAsString());
        QVERIFY(parseKeepingStorage(first, &kept));
        // Ten times the values: a capacity no parse of them would choose,
        // which survives only if the storage is kept (a freed block's
        // address may well be handed out again, so the pointer alone proves
        // little).
        kept.mutable_push()->mutable_gradients(0)->mutable_values()->Reserve(1000000);
        const int capacity = kept.push().gradients(0).values().Capacity();
        const float *storage = kept.push().gradients(0).values().data();

        const proto::TrainRequest second = pushOf({100000, 10}, 2.0f);
        grpc::ByteBuffer bytes = bufferOf(second.SerializeAsString());
        QVERIFY(parseKeepingStorage(bytes, &kept));
        QCOMPARE(kept.push().gradients(0).values().data(), storage);
        QCOMPARE(kept.push().gradients(0).values().Capacity(), capacity);
        QCOMPARE(kept.SerializeAsString(), second.SerializeAsString());
        QCOMPARE(bytes.Length(), size_t(0)); // emptied for the next read
    }

    void theMessageIsWhatAFreshParseMakes_data()
    {
        QTest::addColumn<std::string>("before");
        QTest::addColumn<std::string>("bytes");
        const std::string push = pushOf({5, 1}, 1.0f).SerializeAsString();
        const std::string smallerPush = pushOf({2}, 3.0f).SerializeAsString();
        const std::string join = joinOf(3).SerializeAsString();
        proto::TrainRequest leave;
        leave.mutable_leave()->set_finished(true);
        // Protobuf keeps the last member of a oneof that the bytes set, so
        // concatenated messages say which kind a parse ends with.
        QTest::newRow("push, then a push with fewer values") << push << smallerPush;
        QTest::newRow("push, then a join") << push << join;
        QTest::newRow("push, then a leave") << push << leave.SerializeAsString();
        QTest::newRow("push, then an empty message") << push << std::string();
        QTest::newRow("push, then only a field unknown here") << push << kUnknownField;
        QTest::newRow("push, then a push and an unknown field") << push << smallerPush + kUnknownField;
        QTest::newRow("push, then a push followed by a join") << push << smallerPush + join;
        QTest::newRow("push, then a join followed by a push") << push << join + smallerPush;
        QTest::newRow("push, then two pushes (merged)") << push << smallerPush + smallerPush;
        QTest::newRow("join, then a push") << join << smallerPush;
        QTest::newRow("nothing, then a push") << std::string() << push;
    }

    void theMessageIsWhatAFreshParseMakes()
    {
        QFETCH(std::string, before);
        QFETCH(std::string, bytes);
        proto::TrainRequest kept;
        QVERIFY(kept.ParseFromString(before));
        kept.GetReflection()->MutableUnknownFields(&kept)->AddVarint(14, 9); // must not survive either

        proto::TrainRequest fresh;
        QVERIFY(fresh.ParseFromString(bytes));
        grpc::ByteBuffer buffer = bufferOf(bytes);
        QVERIFY(parseKeepingStorage(buffer, &kept));
        QCOMPARE(kept.kind_case(), fresh.kind_case());
        QCOMPARE(kept.SerializeAsString(), fresh.SerializeAsString());
    }

    void aResponseKeepsItsParametersStorageToo()
    {
        proto::TrainResponse answer;
        answer.mutable_push()->set_global_step(3);
        auto *parameters = answer.mutable_push()->add_parameters();
        for (int i = 0; i < 50000; ++i)
            parameters->add_values(float(i));
        proto::TrainResponse kept;
        grpc::ByteBuffer bytes = bufferOf(answer.SerializeAsString());
        QVERIFY(parseKeepingStorage(bytes, &kept));
        kept.mutable_push()->mutable_parameters(0)->mutable_values()->Reserve(500000);
        const int capacity = kept.push().parameters(0).values().Capacity();
        const float *storage = kept.push().parameters(0).values().data();
        answer.mutable_push()->set_global_step(4);
        bytes = bufferOf(answer.SerializeAsString());
        QVERIFY(parseKeepingStorage(bytes, &kept));
        QCOMPARE(kept.push().parameters(0).values().data(), storage);
        QCOMPARE(kept.push().parameters(0).values().Capacity(), capacity);
        QCOMPARE(kept.push().global_step(), int64_t(4));

        // A join answer after pushes: the push is gone, as a fresh parse has it.
        proto::TrainResponse joined;
        joined.mutable_join()->set_ready(true);
        bytes = bufferOf(joined.SerializeAsString());
        QVERIFY(parseKeepingStorage(bytes, &kept));
        QVERIFY(!kept.has_push());
        QVERIFY(kept.join().ready());
    }

    void bytesThatAreNoMessageAreRefused_data()
    {
        QTest::addColumn<std::string>("bytes");
        // After a push was kept, so the scan for the last kind runs too.
        QTest::newRow("a truncated varint") << std::string("\x08\xff", 2);
        QTest::newRow("a push whose length runs past the end") << std::string("\x12\x7f\x08\x01", 4);
        QTest::newRow("field number 0") << std::string("\x00\x01", 2);
        QTest::newRow("an end-group tag with no group") << std::string("\x0c", 1);
        QTest::newRow("a push that claims 2 GB") << std::string("\x12\xff\xff\xff\xff\x07", 6);
    }

    void bytesThatAreNoMessageAreRefused()
    {
        QFETCH(std::string, bytes);
        proto::TrainRequest kept = pushOf({3}, 1.0f);
        proto::TrainRequest fresh;
        QVERIFY(!fresh.ParseFromString(bytes));
        grpc::ByteBuffer buffer = bufferOf(bytes);
        QVERIFY(!parseKeepingStorage(buffer, &kept));
    }

    // A worker's push: its tensors carry shapes, the values are the
    // worker's own gradient vectors. The bytes parse to the push with those
    // values in its tensors, and the large ones go out from where they lie.
    void aPushSentFromTheGradientsParsesToTheFullMessage()
    {
        const proto::TrainRequest full = [] {
            proto::TrainRequest request = pushOf({100000, 10, 0, 3}, 1.5f);
            request.mutable_push()->add_metrics(0.25f);
            request.mutable_push()->mutable_gradients(1)->add_shape(1); // a [10, 1] tensor
            return request;
        }();
        std::vector<std::vector<float>> gradients;
        proto::TrainRequest request = full;
        for (auto &tensor : *request.mutable_push()->mutable_gradients()) {
            gradients.emplace_back(tensor.values().begin(), tensor.values().end());
            tensor.clear_values();
        }
        const TensorValues values(gradients.begin(), gradients.end());
        const std::string shapesOnly = request.SerializeAsString();
        grpc::ByteBuffer buffer;
        QVERIFY(serializeSharingValues(request, values, &buffer));
        QCOMPARE(request.SerializeAsString(), shapesOnly);

        std::vector<grpc::Slice> slices;
        QVERIFY(buffer.Dump(&slices).ok());
        std::string bytes;
        bool shared = false;
        for (const grpc::Slice &slice : slices) {
            bytes.append(reinterpret_cast<const char *>(slice.begin()), slice.size());
            shared = shared || slice.begin() == reinterpret_cast<const uint8_t *>(gradients[0].data());
        }
        QVERIFY2(shared, "the first gradient's values were copied");
        // The push's other fields come before its tensors here: other bytes
        // than protobuf's order, as many as its, and the same message.
        QCOMPARE(bytes.size(), full.SerializeAsString().size());
        proto::TrainRequest parsed;
        QVERIFY(parsed.ParseFromString(bytes));
        QCOMPARE(parsed.SerializeAsString(), full.SerializeAsString());

        // Under 64 KiB of values a copy is cheaper: into the tensors, and the
        // bytes are protobuf's own.
        const proto::TrainRequest smallFull = pushOf({7850}, 2.0f);
        proto::TrainRequest small = smallFull;
        const std::vector<float> smallGradient(small.push().gradients(0).values().begin(),
                                               small.push().gradients(0).values().end());
        small.mutable_push()->mutable_gradients(0)->clear_values();
        QVERIFY(serializeSharingValues(small, {smallGradient}, &buffer));
        slices.clear();
        QVERIFY(buffer.Dump(&slices).ok());
        for (const grpc::Slice &slice : slices)
            QVERIFY(slice.begin() != reinterpret_cast<const uint8_t *>(smallGradient.data()));
        QVERIFY(parseKeepingStorage(buffer, &parsed));
        QCOMPARE(parsed.SerializeAsString(), smallFull.SerializeAsString());

        // Values in two places, or a span per tensor missing: refused, not guessed.
        proto::TrainRequest both = full;
        QVERIFY(!serializeSharingValues(both, values, &buffer));
        request = full;
        for (auto &tensor : *request.mutable_push()->mutable_gradients())
            tensor.clear_values();
        QVERIFY(!serializeSharingValues(request, TensorValues(values.begin(), values.end() - 1), &buffer));
    }

    void anAnswerSentSharingItsParametersParsesToTheSameMessage()
    {
        proto::TrainResponse answer;
        auto *push = answer.mutable_push();
        push->set_global_step(41);
        push->set_outcome(proto::APPLIED);
        for (const int size : {20000, 1}) {
            auto *parameters = push->add_parameters();
            parameters->add_shape(size);
            for (int i = 0; i < size; ++i)
                parameters->add_values(float(i) / 3);
        }
        const std::string before = answer.SerializeAsString();
        grpc::ByteBuffer buffer;
        QVERIFY(serializeSharingValues(answer, &buffer));
        proto::TrainResponse kept;
        QVERIFY(parseKeepingStorage(buffer, &kept));
        QCOMPARE(kept.SerializeAsString(), before);
        QCOMPARE(answer.SerializeAsString(), before);

        // Under 64 KiB of values a copy is cheaper: the bytes are protobuf's own.
        proto::TrainResponse small;
        small.mutable_push()->add_parameters()->mutable_values()->Resize(7850, 0.5f);
        QVERIFY(serializeSharingValues(small, &buffer));
        std::vector<grpc::Slice> slices;
        QVERIFY(buffer.Dump(&slices).ok());
        for (const grpc::Slice &slice : slices)
            QVERIFY(slice.begin() != reinterpret_cast<const uint8_t *>(small.push().parameters(0).values().data()));
        QVERIFY(parseKeepingStorage(buffer, &kept));
        QCOMPARE(kept.SerializeAsString(), small.SerializeAsString());

        // Not a push: as protobuf writes it.
        proto::TrainResponse joined;
        joined.mutable_join()->set_ready(true);
        QVERIFY(serializeSharingValues(joined, &buffer));
        QVERIFY(parseKeepingStorage(buffer, &kept));
        QCOMPARE(kept.SerializeAsString(), joined.SerializeAsString());
    }

    // The worker's read of an answer: the parameters' values go from the
    // bytes straight to its vectors, the rest into the message. As the ps
    // sends it and as protobuf writes it.
    void anAnswersParametersGoStraightToWhereTheyBelong()
    {
        const proto::TrainResponse answer = answerOf({20000, 1, 0}, 0.5f);
        proto::TrainResponse withoutValues = answer;
        for (auto &tensor : *withoutValues.mutable_push()->mutable_parameters())
            tensor.clear_values();

        proto::TrainResponse sharing = answer;
        grpc::ByteBuffer sent;
        QVERIFY(serializeSharingValues(sharing, &sent));
        grpc::ByteBuffer plain = bufferOf(answer.SerializeAsString());
        AnswerReader reader;
        proto::TrainResponse response;
        for (grpc::ByteBuffer *bytes : {&sent, &plain}) {
            Destinations to({20000, 1, 0});
            QCOMPARE(reader.read(*bytes, &response, to.spans), ParameterDelivery::Delivered);
            QCOMPARE(response.SerializeAsString(), withoutValues.SerializeAsString());
            for (size_t i = 0; i < to.rows.size(); ++i) {
                const auto &values = answer.push().parameters(int(i)).values();
                QVERIFY(std::equal(to.rows[i].begin(), to.rows[i].end(), values.begin(), values.end()));
            }
            QCOMPARE(bytes->Length(), size_t(0)); // emptied for the next read
        }

        // A join answer after pushes: the push is gone, as a fresh parse has it.
        proto::TrainResponse joined;
        joined.mutable_join()->set_ready(true);
        grpc::ByteBuffer bytes = bufferOf(joined.SerializeAsString());
        Destinations to({20000, 1, 0});
        QCOMPARE(reader.read(bytes, &response, to.spans), ParameterDelivery::InMessage);
        QCOMPARE(response.SerializeAsString(), joined.SerializeAsString());
    }

    // Legal protobuf the ps does not write, and answers that do not fit the
    // worker's variables: the message is what protobuf's own parse makes,
    // values included, so the worker copies them or says what is wrong.
    void anAnswerOfAnotherFormIsParsedAsProtobufParsesIt_data()
    {
        QTest::addColumn<std::string>("bytes");
        const std::string whole = tensorBytes(300, 1.0f);
        const std::string small = tensorBytes(2, 2.0f);
        QTest::newRow("the values in two packed runs")
            << answerBytes({tensorBytes(150, 1.0f) + tensorBytes(150, 51.0f).substr(4), small});
        std::string oneByOne = std::string("\x08\x02", 2); // shape [2]
        for (const float value : {2.0f, 7.0f})
            oneByOne += std::string("\x15", 1) + std::string(reinterpret_cast<const char *>(&value), 4);
        QTest::newRow("values written one by one") << answerBytes({whole, oneByOne});
        QTest::newRow("more values than the variable has") << answerBytes({tensorBytes(301, 1.0f), small});
        QTest::newRow("a tensor without values") << answerBytes({whole, std::string("\x08\x02", 2)});
        QTest::newRow("one tensor too few") << answerBytes({whole});
        QTest::newRow("one tensor too many") << answerBytes({whole, small, small});
        QTest::newRow("two pushes, which protobuf merges") << answerBytes({whole}) + answerBytes({small});
        QTest::newRow("a field of a later .proto after the push") << answerBytes({whole, small}) + kUnknownField;
    }

    void anAnswerOfAnotherFormIsParsedAsProtobufParsesIt()
    {
        QFETCH(std::string, bytes);
        proto::TrainResponse fresh;
        QVERIFY(fresh.ParseFromString(bytes));
        AnswerReader reader;
        proto::TrainResponse response = answerOf({300, 2}, 9.0f);
        Destinations to({300, 2});
        grpc::ByteBuffer buffer = bufferOf(bytes);
        QCOMPARE(reader.read(buffer, &response, to.spans), ParameterDelivery::InMessage);
        QCOMPARE(response.SerializeAsString(), fresh.SerializeAsString());
    }

    void anAnswerThatIsNoMessageIsRefused_data()
    {
        QTest::addColumn<std::string>("bytes");
        const std::string whole = answerBytes({tensorBytes(300, 1.0f), tensorBytes(2, 2.0f)});
        QTest::newRow("cut in the values") << whole.substr(0, whole.size() - 20);
        QTest::newRow("cut after a tensor") << whole.substr(0, whole.size() - tensorBytes(2, 2.0f).size());
        QTest::newRow("a tensor longer than its push") << lengthDelimited(
            proto::TrainResponse::kPushFieldNumber, std::string("\x32\x7f", 2) + tensorBytes(2, 2.0f));
        QTest::newRow("a push that claims 2 GB") << std::string("\x12\xff\xff\xff\xff\x07", 6);
        QTest::newRow("field number 0 after the push") << whole + std::string("\x00\x01", 2);
    }

    void anAnswerThatIsNoMessageIsRefused()
    {
        QFETCH(std::string, bytes);
        proto::TrainResponse fresh;
        QVERIFY(!fresh.ParseFromString(bytes));
        AnswerReader reader;
        proto::TrainResponse response;
        Destinations to({300, 2});
        grpc::ByteBuffer buffer = bufferOf(bytes);
        QCOMPARE(reader.read(buffer, &response, to.spans), ParameterDelivery::Malformed);
    }

    void trainIsCalledByItsGrpcPath()
    {
        QCOMPARE(QByteArray(trainMethodPath()), QByteArray("/parasync.proto.ParameterService/Train"));
    }
};

QTEST_GUILESS_MAIN(TestTrainCall)
#include "tst_train_call.moc"
