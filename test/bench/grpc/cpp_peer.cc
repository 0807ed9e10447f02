// C++ gRPC (Debian libgrpc++) peer for the benchmark: the same pillar.test.v1.Echo Unary as
// test/interop/grpc/echo_server.c, and the same bench client loop as echo_client.c.
//   cpp_peer server ADDR            prints "ready"; serves until killed
//   cpp_peer client ADDR N CONC SIZE  prints "p50_us= p99_us= rps="
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

static int client(const std::string &addr, long n, int conc, int size)
{
	auto ch = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
	auto stub = Echo::NewStub(ch);
	std::vector<uint64_t> lat(static_cast<size_t>(n));
	std::atomic<long> next{0};
	auto now_us = [] {
		return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
		                                 std::chrono::steady_clock::now().time_since_epoch())
		                                 .count());
	};
	auto work = [&](bool warm) {
		EchoRequest rq;
		rq.set_payload(std::string(static_cast<size_t>(size), '\0'));
		rq.set_response_size(size);
		long i;
		while ((i = warm ? (next++ < 1 ? 0 : n) : next++) < n) {
			grpc::ClientContext ctx;
			ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
			EchoResponse r;
			uint64_t t0 = now_us();
			grpc::Status st = stub->Unary(&ctx, rq, &r);
			if (!st.ok()) {
				std::fprintf(stderr, "call failed: %d %s\n", st.error_code(),
				             st.error_message().c_str());
				std::exit(1);
			}
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

int main(int argc, char **argv)
{
	if (argc >= 3 && std::string(argv[1]) == "server")
		return server(argv[2]);
	if (argc >= 6 && std::string(argv[1]) == "client")
		return client(argv[2], std::atol(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
	std::fprintf(stderr, "usage: cpp_peer server ADDR | client ADDR N CONC SIZE\n");
	return 2;
}
