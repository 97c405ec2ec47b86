/* Dev-time oracle: feeds fixed attribute values to rdma-core's devinfo.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stddef.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <infiniband/driver.h>

struct gidfix { int port, index; const char *text; int type; /* 0 = IB/RoCE v1, 1 = RoCE v2 */ };

struct devfix {
	const char *name; int transport; const char *board_id; int ncv;
	const char *fw; uint64_t node_guid, sys_guid;
	void (*fill)(struct ibv_device_attr_ex *);
	void (*port)(int p, struct ibv_port_attr *);
	const struct gidfix *gids;
};

/* ---- fixture 1: rxe ---- */
static void f1_fill(struct ibv_device_attr_ex *e)
{
	struct ibv_device_attr *a = &e->orig_attr;
	a->max_mr_size = ~0ULL; a->page_size_cap = 0xfffff000; a->vendor_id = 0xffffff;
	a->vendor_part_id = 0; a->hw_ver = 0; a->max_qp = 0x10000; a->max_qp_wr = 0x4000;
	a->device_cap_flags = 0x21207c76; a->max_sge = 32; a->max_sge_rd = 32;
	a->max_cq = 0x4000; a->max_cqe = 0x7fff; a->max_mr = 0x40000; a->max_pd = 0x7ff0;
	a->max_qp_rd_atom = 128; a->max_res_rd_atom = 0x3f80; a->max_qp_init_rd_atom = 128;
	a->atomic_cap = 1; a->max_mw = 0x10000; a->max_mcast_grp = 8192;
	a->max_mcast_qp_attach = 56; a->max_total_mcast_qp_attach = 0x70000; a->max_ah = 0x7ff0;
	a->max_srq = 0x3ff0; a->max_srq_wr = 0x4000; a->max_srq_sge = 27; a->max_pkeys = 64;
	a->local_ca_ack_delay = 15; a->phys_port_cnt = 1;
	e->device_cap_flags_ex = 0x21207c76;
}
static void f1_port(int p, struct ibv_port_attr *x)
{
	x->state = 4; x->max_mtu = 5; x->active_mtu = 3; x->gid_tbl_len = 1024;
	x->port_cap_flags = 0x00010000; x->max_msg_sz = 0x800000; x->pkey_tbl_len = 1;
	x->max_vl_num = 1; x->active_width = 1; x->active_speed = 8; x->phys_state = 5;
	x->link_layer = 2; x->flags = 1;
}
static const struct gidfix f1_gids[] = {
	{1, 0, "fe80::5054:ff:fe12:3456", 1}, {1, 1, "::ffff:10.0.0.1", 1}, {0}
};

/* ---- fixture 2: mlx5-like, two ports ---- */
static void f2_fill(struct ibv_device_attr_ex *e)
{
	struct ibv_device_attr *a = &e->orig_attr;
	a->max_mr_size = ~0ULL; a->page_size_cap = 0xfffffffffffff000ULL; a->vendor_id = 0x02c9;
	a->vendor_part_id = 0x80000001u; a->hw_ver = 0xa; a->max_qp = 262144; a->max_qp_wr = 32768;
	a->device_cap_flags = 0xed721c36u; a->max_sge = 30; a->max_sge_rd = 30;
	a->max_cq = 16777216; a->max_cqe = 4194303; a->max_mr = 16777216; a->max_pd = 8388608;
	a->max_qp_rd_atom = 16; a->max_res_rd_atom = 4194304; a->max_qp_init_rd_atom = 16;
	a->atomic_cap = 2; a->max_mw = 16777216; a->max_mcast_grp = 2097152;
	a->max_mcast_qp_attach = 240; a->max_total_mcast_qp_attach = 503316480; a->max_ah = 2147483647;
	a->max_fmr = 5; a->max_map_per_fmr = 32; a->max_srq = 0; a->max_srq_wr = 32767; a->max_srq_sge = 31;
	a->max_pkeys = 128; a->local_ca_ack_delay = 16; a->phys_port_cnt = 2;
	e->odp_caps.general_caps = 0x7; e->odp_caps.per_transport_caps.rc_odp_caps = 0x13f;
	e->odp_caps.per_transport_caps.uc_odp_caps = 0x3; e->odp_caps.per_transport_caps.ud_odp_caps = 0x9;
	e->xrc_odp_caps = 0x2f;
	e->completion_timestamp_mask = 0x7fffffffffffffffULL; e->hca_core_clock = 156250;
	e->raw_packet_caps = 0x1f; e->device_cap_flags_ex = 0x54ed721c36ULL;
	e->tso_caps.max_tso = 262144; e->tso_caps.supported_qpts = (1 << 8) | (1 << 4) | 1;
	e->rss_caps.max_rwq_indirection_tables = 1048576; e->rss_caps.max_rwq_indirection_table_size = 2048;
	e->rss_caps.rx_hash_function = 1; e->rss_caps.rx_hash_fields_mask = 0x800000ffULL;
	e->rss_caps.supported_qpts = 1 << 8; e->max_wq_type_rq = 16777216;
	e->packet_pacing_caps.qp_rate_limit_min = 1; e->packet_pacing_caps.qp_rate_limit_max = 100000000;
	e->packet_pacing_caps.supported_qpts = (1 << 8) | (1 << 4);
	e->tm_caps.max_rndv_hdr_size = 64; e->tm_caps.max_num_tags = 127; e->tm_caps.flags = 1;
	e->tm_caps.max_ops = 32768; e->tm_caps.max_sge = 1;
	e->cq_mod_caps.max_cq_count = 65535; e->cq_mod_caps.max_cq_period = 4095;
	e->max_dm_size = 131072;
}
static void f2_port(int p, struct ibv_port_attr *x)
{
	if (p == 1) {
		x->state = 4; x->max_mtu = 5; x->active_mtu = 5; x->gid_tbl_len = 128;
		x->port_cap_flags = 0x2651e848; x->port_cap_flags2 = 0x0032; x->max_msg_sz = 0x40000000;
		x->pkey_tbl_len = 128; x->lid = 7; x->sm_lid = 1; x->lmc = 0; x->max_vl_num = 4;
		x->subnet_timeout = 18; x->active_width = 2; x->active_speed = 64; x->phys_state = 5;
		x->link_layer = 1;
	} else {
		x->state = 1; x->max_mtu = 5; x->active_mtu = 0; x->gid_tbl_len = 256;
		x->port_cap_flags = 0x04010000; x->max_msg_sz = 0x40000000; x->pkey_tbl_len = 1;
		x->bad_pkey_cntr = 3; x->qkey_viol_cntr = 0x1f; x->lmc = 3; x->sm_sl = 2; x->init_type_reply = 1;
		x->max_vl_num = 0; x->active_width = 16; x->active_speed = 3; x->phys_state = 3;
		x->link_layer = 2;
	}
}
static const struct gidfix f2_gids[] = {
	{1, 0, "fe80::c42:a103:65:f3a0", 0}, {1, 1, "fe80::", 0}, {1, 2, "fec0::c42:a103:65:f3a0", 0},
	{2, 0, "fe80::e42:a1ff:fe65:f3a0", 0}, {2, 1, "fe80::e42:a1ff:fe65:f3a0", 1},
	{2, 2, "::ffff:192.168.1.5", 0}, {2, 3, "::ffff:192.168.1.5", 1}, {2, 100, "2001:db8::1", 1},
	{0}
};

/* ---- fixture 3: iWARP, oddities ---- */
static void f3_fill(struct ibv_device_attr_ex *e)
{
	struct ibv_device_attr *a = &e->orig_attr;
	a->max_mr_size = 0x100000000ULL; a->page_size_cap = 0x1000; a->vendor_id = 0x8086;
	a->vendor_part_id = 5522; a->hw_ver = 0x1b; a->max_qp = 131071; a->max_qp_wr = 4063;
	a->device_cap_flags = 0; a->max_sge = 13; a->max_sge_rd = 13;
	a->max_cq = 262143; a->max_cqe = 1048575; a->max_mr = 2097150; a->max_pd = 262143;
	a->max_qp_rd_atom = 127; a->max_res_rd_atom = 0; a->max_qp_init_rd_atom = 127;
	a->atomic_cap = 3; a->max_mw = 0; a->max_ah = 0; a->max_srq = 0; a->max_pkeys = 0;
	a->local_ca_ack_delay = 0; a->phys_port_cnt = 1;
	e->cq_mod_caps.max_cq_count = 5; e->cq_mod_caps.max_cq_period = 0;
	e->packet_pacing_caps.qp_rate_limit_min = 7;
}
static void f3_port(int p, struct ibv_port_attr *x)
{
	x->state = 5; x->max_mtu = 4; x->active_mtu = 1; x->gid_tbl_len = 4;
	x->port_cap_flags = 0x00050000; x->max_msg_sz = 0x7fffffff; x->pkey_tbl_len = 0;
	x->max_vl_num = 5; x->active_width = 8; x->active_speed = 16; x->phys_state = 0;
	x->link_layer = 0;
}
static const struct gidfix f3_gids[] = {
	{1, 0, "fe80::1:2:3:4", 1}, {1, 3, "::1", 1}, {0}
};

static const struct devfix fixtures[] = {
	{"rxe0", 0, NULL, 1, "0.0.0", 0x505400fffe123456ULL, 0, f1_fill, f1_port, f1_gids},
	{"mlx5_0", 0, "MT_0000000222", 63, "20.31.1014", 0x0c42a1030065f3a0ULL, 0x0c42a1030065f3a0ULL, f2_fill, f2_port, f2_gids},
	{"iwp0s1", 1, "", 0, "", 0x0000000000000001ULL, 0xffffffffffffffffULL, f3_fill, f3_port, f3_gids},
};
#define NFIX 3

struct fakectx { struct verbs_context vc; const struct devfix *f; };
static struct ibv_device devs[NFIX];
static struct ibv_device *devlist[NFIX + 1];

struct ibv_device **ibv_get_device_list(int *num)
{
	for (int i = 0; i < NFIX; i++) {
		memset(&devs[i], 0, sizeof(devs[i]));
		strcpy(devs[i].name, fixtures[i].name);
		devs[i].transport_type = fixtures[i].transport;
		snprintf(devs[i].ibdev_path, sizeof(devs[i].ibdev_path), "%d", i);
		devlist[i] = &devs[i];
	}
	devlist[NFIX] = NULL;
	if (num) *num = NFIX;
	return devlist;
}
void ibv_free_device_list(struct ibv_device **l) { (void)l; }
const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

static struct fakectx *fc_of(struct ibv_context *c) { return (struct fakectx *)((char *)c - offsetof(struct verbs_context, context)); }
static const struct devfix *fix_of(struct ibv_context *c) { return fc_of(c)->f; }

static int q_dev_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
		    struct ibv_device_attr_ex *attr, size_t size)
{
	const struct devfix *f = fix_of(c);
	memset(attr, 0, size);
	strcpy(attr->orig_attr.fw_ver, f->fw);
	attr->orig_attr.node_guid = htobe64(f->node_guid);
	attr->orig_attr.sys_image_guid = htobe64(f->sys_guid);
	f->fill(attr);
	return 0;
}
static int q_port(struct ibv_context *c, uint8_t p, struct ibv_port_attr *a, size_t size)
{
	memset(a, 0, size);
	fix_of(c)->port(p, a);
	return 0;
}
struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	struct fakectx *fc = calloc(1, sizeof(*fc));
	fc->f = &fixtures[d - devs];
	fc->vc.sz = sizeof(fc->vc);
	fc->vc.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	fc->vc.context.device = d;
	fc->vc.context.num_comp_vectors = fc->f->ncv;
	fc->vc.query_device_ex = q_dev_ex;
	fc->vc.query_port = q_port;
	return &fc->vc.context;
}
int ibv_close_device(struct ibv_context *c) { free(fc_of(c)); return 0; }
int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a) { abort(); }

static const struct gidfix *find_gid(struct ibv_context *c, int port, int index)
{
	for (const struct gidfix *g = fix_of(c)->gids; g->text; g++)
		if (g->port == port && g->index == index)
			return g;
	return NULL;
}
int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	const struct gidfix *g = find_gid(c, port, index);
	memset(gid, 0, sizeof(*gid));
	if (g) inet_pton(AF_INET6, g->text, gid->raw);
	return 0;
}
int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index, enum ibv_gid_type_sysfs *type)
{
	const struct gidfix *g = find_gid(c, port, index);
	*type = g ? g->type : 0;
	return 0;
}
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	const struct devfix *f = &fixtures[atoi(dir)];
	if (strcmp(file, "board_id") || !f->board_id)
		return -1;
	snprintf(buf, size, "%s", f->board_id);
	return strlen(buf);
}
#undef ibv_query_port
int ibv_query_port(struct ibv_context *c, uint8_t p, struct _compat_ibv_port_attr *a) { abort(); }
