/* plans-default.c: which layers of both models the default configuration runs with two chunks per
 * warp (two_chunks_pay), every fp16 marlin row, M = 1..8; output: plans-default.txt. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "qvet/variant.h"
#include "../kernels/wonly_small.cuh"
int main(void){
  int shp[][3]={{8192,10240,8192},{8192,8192,8192},{8192,57344,8192},{28672,8192,28672},{4096,12288,4096},{4096,4096,4096},{4096,22016,4096},{11008,4096,11008}};
  const char *ln[]={"70b-qkv","70b-o","70b-gu","70b-down","7b-qkv","7b-o","7b-gu","7b-down"};
  unsetenv("QVET_WO_SMALL");
  for(int i=0;qv_registry_get(i);i++){ const qv_variant*v=qv_registry_get(i); if(strcmp(v->family,"marlin"))continue;
   if(!strstr(v->name,"-f16")) continue;
   for(int m=1;m<=8;m++){ printf("%-26s M=%d:",v->name,m);
    for(int s=0;s<8;s++){ qv_wo_small_plan_info p; qv_wonly_small_plan_info(v,m,shp[s][1],shp[s][0],&p); if(p.cpw==2) printf(" %s(%dx%d)",ln[s],p.n_blocks,p.splits);} printf("\n");}}
}
