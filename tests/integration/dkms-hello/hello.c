// SPDX-License-Identifier: GPL-2.0
/* A module that does nothing: gpuhost.tuning builds it with real dkms, never loads it. */
#include <linux/init.h>
#include <linux/module.h>

static int __init gpuhost_hello_init(void)
{
	pr_info("gpuhost-hello loaded\n");
	return 0;
}

static void __exit gpuhost_hello_exit(void)
{
}

module_init(gpuhost_hello_init);
module_exit(gpuhost_hello_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gpuhost.tuning dkms integration test module");
MODULE_VERSION("0.1");
