/* An in-process HTTPS/HTTP/2 server for the src/kube tests, built on src/h2 (its own event loop):
 * it answers each request with what a handler chose, typically a response recorded from a real
 * kube-apiserver 1.32 (test/unit/kube/, copied from ../shared/kube/transcripts/), sending each
 * chunk as its own DATA frame so that chunk boundaries fall where the recording had them.
 * Certificates are throwaway ones made with openssl(1) in a temporary directory. */
#ifndef PILLAR_TEST_KUBE_FAKE_H
#define PILLAR_TEST_KUBE_FAKE_H

#include <stdbool.h>
#include <stddef.h>

struct kf_req {
	char method[16], path[2048], ua[256], auth[1024], ctype[128], accept[128];
	char *body; /* NUL-terminated */
	size_t body_len;
};

#define KF_CHUNKS_MAX 32
struct kf_resp {
	int status;
	char *chunks[KF_CHUNKS_MAX]; /* kf_resp_add copies */
	size_t n_chunks;
	bool hold;   /* keep the stream open after the chunks (an idle watch) */
	bool silent; /* answer nothing, not even headers (a server slow to answer) */
	const char *retry_after, *ctype; /* headers (static strings): NULL for none / JSON */
};

typedef void (*kf_handler)(void *arg, const struct kf_req *rq, struct kf_resp *resp);

struct kf_certs {
	char dir[256];
	char ca[300], server_cert[300], server_key[300], client_cert[300], client_key[300];
};

/* Makes a CA, a server certificate for 127.0.0.1/localhost and a client certificate
 * (CN=pillar-test, O=system:masters).  Fails the test on error. */
void kf_certs_make(struct kf_certs *c);
void kf_certs_remove(struct kf_certs *c);

struct kf_server;
/* Listens on 127.0.0.1:0; with mtls the server asks for (and verifies) a client certificate. */
struct kf_server *kf_start(const struct kf_certs *c, bool mtls, kf_handler fn, void *arg);
int kf_port(const struct kf_server *s);
void kf_stop(struct kf_server *s);
/* Requests served so far (a copy of the n-th, NULL past the end; valid until kf_stop). */
size_t kf_requests(struct kf_server *s);
const struct kf_req *kf_request(struct kf_server *s, size_t i);
/* Closes every connection (the server stays up: a restart as the client sees it). */
void kf_drop(struct kf_server *s);
/* Sends GOAWAY (NO_ERROR) on every connection: streams in flight go on, new ones are refused. */
void kf_goaway(struct kf_server *s);
/* Connections accepted so far. */
unsigned kf_connections(struct kf_server *s);

void kf_resp_add(struct kf_resp *r, const char *data, size_t len);
/* Sets the response to a recorded transcript's answer (test/unit/kube/NAME): status and
 * body_raw, or for a watch its chunks.  Fails the test when the file is unusable. */
void kf_resp_transcript(struct kf_resp *r, const char *name);
/* The recorded request's body (JSON text, compact) or path of a transcript, malloc'd. */
char *kf_transcript_request(const char *name, const char *what);

/* Writes a kubeconfig for s (bearer token `token`) to path (for store_kube_open). */
void kf_kubeconfig(struct kf_server *s, const struct kf_certs *c, const char *token,
                   const char *path);

struct kube_client;
/* A src/kube client of s (bearer token `token`, component pillar-csi-controller, no rate
 * limit).  Fails the test on error. */
struct kube_client *kf_client(struct kf_server *s, const struct kf_certs *c, const char *token);

#endif
