// C++ gRPC (Debian libgrpc++) peer for the benchmark: the same pillar.test.v1.Echo Unary as
// test/interop/grpc/echo_server.c, and the same bench client loop as echo_client.c.
//   cpp_peer server ADDR            prints "ready"; serves until killed
//   cpp_peer client ADDR N CONC SIZE  prints "p50_us= p99_us= rps="
//   cpp_peer call ADDR PATH N CONC [HEX]  the same loop calling PATH (e.g. /csi.v1.Identity/Probe)
//                                     with the request message HEX (hex digits of its encoding;
//                                     default empty), through the generic stub
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "echo.grpc.pb.h"

using pillar::test::v1::Echo;
using pillar::test::v1::EchoRequest;
using pillar::test::v1::EchoResponse;

class EchoImpl final : public Echo::Service {
	grpc::Status Unary(grpc::ServerContext *, const EchoRequest *rq, EchoResponse *r) override
	{
		r->set_message(rq->message());
		if (rq->response_size() > 0)
			r->set_payload(std::string(static_cast<size_t>(rq->response_size()), 'x'));
		return grpc::Status::OK;
	}
};

static int server(const std::string &addr)
{
	EchoImpl svc;
	grpc::ServerBuilder b;
	b.AddListeningPort(addr, grpc::InsecureServerCredentials());
	b.RegisterService(&svc);
	std::unique_ptr<grpc::Server> s(b.BuildAndStart());
	if (!s)
		return 1;
	std::printf("ready\n");
	std::fflush(stdout);
	s->Wait();
	return 0;
}

static uint64_t now_us()
{
	return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
	                                 std::chrono::steady_clock::now().time_since_epoch())
	                                 .count());
}

// Runs one_call n times from conc threads (after one warm-up call) and prints the figures.
static int bench(long n, int conc, const std::function<bool()> &one_call)
{
	std::vector<uint64_t> lat(static_cast<size_t>(n));
	std::atomic<long> next{0};
	auto work = [&](bool warm) {
		long i;
		while ((i = warm ? (next++ < 1 ? 0 : n) : next++) < n) {
			uint64_t t0 = now_us();
			if (!one_call())
				std::exit(1);
			if (!warm)
				lat[static_cast<size_t>(i)] = now_us() - t0;
		}
	};
	work(true);
	next = 0;
	uint64_t t0 = now_us();
	std::vector<std::thread> ts;
	for (int k = 0; k < conc; k++)
		ts.emplace_back(work, false);
	for (auto &t : ts)
		t.join();
	uint64_t t1 = now_us();
	std::sort(lat.begin(), lat.end());
	std::printf("p50_us=%llu p99_us=%llu rps=%.0f\n",
	            static_cast<unsigned long long>(lat[static_cast<size_t>(n / 2)]),
	            static_cast<unsigned long long>(lat[static_cast<size_t>(n * 99 / 100)]),
	            static_cast<double>(n) * 1e6 / static_cast<double>(t1 - t0));
	return 0;
}

static int client(const std::string &addr, long n, int conc, int size)
{
	auto ch = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
	auto stub = Echo::NewStub(ch);
	return bench(n, conc, [&] {
		EchoRequest rq;
		rq.set_payload(std::string(static_cast<size_t>(size), '\0'));
		rq.set_response_size(size);
		grpc::ClientContext ctx;
		ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
		EchoResponse r;
		grpc::Status st = stub->Unary(&ctx, rq, &r);
		if (!st.ok())
			std::fprintf(stderr, "call failed: %d %s\n", st.error_code(),
			             st.error_message().c_str());
		return st.ok();
	});
}

// A completion queue per calling thread, drained when the thread ends.
struct ThreadQueue {
	grpc::CompletionQueue cq;
	~ThreadQueue()
	{
		void *tag;
		bool ok;
		cq.Shutdown();
		while (cq.Next(&tag, &ok)) {
		}
	}
};

// One call of path with an empty request, through the generic stub (no generated code), waited
// for on the calling thread's own completion queue as a synchronous stub waits.
static bool generic_call(grpc::GenericStub &stub, const std::string &path,
                         const std::string &body)
{
	static thread_local ThreadQueue queue;
	grpc::ClientContext ctx;
	ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
	grpc::Slice message(body);
	grpc::ByteBuffer rq(&message, 1), r; /* a default ByteBuffer is no message at all */
	grpc::Status st;
	void *tag;
	bool ok = false;
	auto rpc = stub.PrepareUnaryCall(&ctx, path, rq, &queue.cq);
	rpc->StartCall();
	rpc->Finish(&r, &st, &queue);
	if (!queue.cq.Next(&tag, &ok) || !ok)
		st = grpc::Status(grpc::StatusCode::UNKNOWN, "completion queue failed");
	if (!st.ok())
		std::fprintf(stderr, "call failed: %d %s\n", st.error_code(),
		             st.error_message().c_str());
	return st.ok();
}

// The bytes whose hex digits are hex ("" for an odd count or a non-digit: an empty message).
static std::string unhex(const std::string &hex)
{
	std::string out;
	if (hex.size() % 2)
		return out;
	for (size_t i = 0; i < hex.size(); i += 2) {
		char pair[3] = {hex[i], hex[i + 1], 0}, *end;
		long v = std::strtol(pair, &end, 16);
		if (*end)
			return std::string();
		out.push_back(static_cast<char>(v));
	}
	return out;
}

static int call(const std::string &addr, const std::string &path, long n, int conc,
                const std::string &hex)
{
	auto ch = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
	grpc::GenericStub stub(ch);
	const std::string body = unhex(hex);
	return bench(n, conc, [&] { return generic_call(stub, path, body); });
}

int main(int argc, char **argv)
{
	if (argc >= 3 && std::string(argv[1]) == "server")
		return server(argv[2]);
	if (argc >= 6 && std::string(argv[1]) == "client")
		return client(argv[2], std::atol(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
	if (argc >= 6 && std::string(argv[1]) == "call")
		return call(argv[2], argv[3], std::atol(argv[4]), std::atoi(argv[5]),
		            argc >= 7 ? argv[6] : "");
	std::fprintf(stderr,
	             "usage: cpp_peer server ADDR | client ADDR N CONC SIZE | call ADDR PATH N CONC [HEX]\n");
	return 2;
}
