// SPDX-License-Identifier: GPL-2.0
/*
 * uvmstub: registers a character device named "nvidia-uvm" with a DYNAMIC major
 * (register_chrdev(0, ...)), as NVIDIA's nvidia-uvm.ko does, for the VM lab's cgroup guest
 * (lab/cgroup-real.sh). No .open: an open the device controller allows succeeds; no I/O.
 */
#include <linux/fs.h>
#include <linux/module.h>

static int major;
static const struct file_operations uvmstub_fops = { .owner = THIS_MODULE };

static int __init uvmstub_init(void)
{
	major = register_chrdev(0, "nvidia-uvm", &uvmstub_fops);
	if (major < 0)
		return major;
	pr_info("uvmstub: nvidia-uvm major %d\n", major);
	return 0;
}

static void __exit uvmstub_exit(void)
{
	unregister_chrdev(major, "nvidia-uvm");
}

module_init(uvmstub_init);
module_exit(uvmstub_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gpuhost.tuning VM lab: a char device named nvidia-uvm, dynamic major");
