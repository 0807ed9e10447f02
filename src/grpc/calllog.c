/* grpc/calllog — see calllog.h. */
#include "grpc/calllog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "grpc/status.h"

static calllog_format_fn format;

void calllog_set_format(calllog_format_fn fn)
{
	format = fn;
}

/* The logged text of m (caller frees), or NULL. */
static char *text_of(const ProtobufCMessage *m)
{
	if (format)
		return format(m);
	char *t = NULL;
	if (asprintf(&t, "<%s>", m->descriptor->name) < 0)
		return NULL;
	return t;
}

/* The string field name of m, or NULL. */
static const char *str_field(const ProtobufCMessage *m, const char *name)
{
	const ProtobufCFieldDescriptor *f =
	    m ? protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name) : NULL;
	if (!f || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	return *(const char *const *)((const char *)m + f->offset);
}

static const ProtobufCMessage *msg_field(const ProtobufCMessage *m, const char *name)
{
	const ProtobufCFieldDescriptor *f =
	    m ? protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name) : NULL;
	if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	return *(const ProtobufCMessage *const *)((const char *)m + f->offset);
}

static const char *volume_of(const ProtobufCMessage *req, const ProtobufCMessage *resp)
{
	const char *v = str_field(req, "volume_id");
	if (!v || !*v)
		v = str_field(msg_field(resp, "volume"), "volume_id");
	if (!v || !*v)
		v = str_field(req, "name");
	return v ? v : "";
}

uint64_t calllog_request(const char *method, const ProtobufCMessage *req)
{
	if (log_verbosity() >= 5) {
		char *t = text_of(req);
		log_info("GRPC request", "method", method, "request", t ? t : "(out of memory)");
		free(t);
	}
	return time_mono_ns();
}

void calllog_result(const char *method, const ProtobufCMessage *req, const ProtobufCMessage *resp,
                    int code, const char *msg, uint64_t start_ns)
{
	char dur[32];
	if (code == GRPC_OK && log_verbosity() < 3)
		return;
	uint64_t ns = time_mono_ns() - start_ns;
	snprintf(dur, sizeof(dur), "%llu.%03llums", (unsigned long long)(ns / 1000000u),
	         (unsigned long long)(ns / 1000u % 1000u));
	const char *vol = volume_of(req, resp), *cname = grpc_code_name(code);
	if (code != GRPC_OK)
		log_error("GRPC call failed", "method", method, "volumeID", vol, "code", cname,
		          "duration", dur, "err", msg ? msg : "");
	else
		log_v(3, "GRPC call", "method", method, "volumeID", vol, "code", cname, "duration",
		      dur);
	if (code == GRPC_OK && resp && log_verbosity() >= 5) {
		char *t = text_of(resp);
		log_info("GRPC response", "method", method, "response", t ? t : "(out of memory)");
		free(t);
	}
}
