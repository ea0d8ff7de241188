#include <cstdio>
typedef unsigned long long u64;
__device__ u64 dsc(unsigned a){return (u64)((a&0x3FFFF)>>4)|((u64)(1024>>4)<<32)|(1ull<<62);}
__global__ void k(int off,float*out){
 extern __shared__ __align__(1024) unsigned char sm[];
 unsigned char*b0=sm+((1024-((unsigned)__cvta_generic_to_shared(sm)&1023))&1023);
 unsigned short*A=(unsigned short*)b0;unsigned short*B=(unsigned short*)(b0+8192+off);
 for(int i=threadIdx.x;i<64*64;i+=128){int r=i/64,c=i%64;float va=(r<16&&c==r)?1.f:0.f;
  A[r*64+(((c/8)^(r&7))*8)+c%8]=__float_as_uint(va)>>16;}
 for(int i=threadIdx.x;i<16*64;i+=128){int r=i/64,c=i%64;float vb=(r&3)*64+c;
  B[r*64+(((c/8)^(r&7))*8)+c%8]=__float_as_uint(vb)>>16;}
 asm volatile("fence.proxy.async.shared::cta;":::"memory");__syncthreads();
 float d[8]={0};unsigned a=(unsigned)__cvta_generic_to_shared(A),b=(unsigned)__cvta_generic_to_shared(B);
 u64 da=dsc(a),db=dsc(b);
 asm volatile("wgmma.fence.sync.aligned;\n{.reg .pred p;setp.ne.b32 p,1,0;\nwgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7},%8,%9,p,1,1,0,0;}\nwgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;":"+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]),"+f"(d[4]),"+f"(d[5]),"+f"(d[6]),"+f"(d[7]):"l"(da),"l"(db):"memory");
 int t=threadIdx.x;for(int i=0;i<8;i++){int row=16*(t>>5)+((t&31)>>2)+8*((i>>1)&1),col=8*(i>>2)+2*(t&3)+(i&1);out[row*16+col]=d[i];}
}
int main(){float*o;cudaMalloc(&o,64*16*4);cudaFuncSetAttribute(k,cudaFuncAttributeMaxDynamicSharedMemorySize,16384);
 for(int off=0;off<=512;off+=512){k<<<1,128,16384>>>(off,o);float h[1024];cudaMemcpy(h,o,4096,cudaMemcpyDeviceToHost);
 int bad=0;for(int m=0;m<16;m++)for(int n=0;n<16;n++)if(h[m*16+n]!=(n&3)*64+m)bad++;
 printf("B offset %d mod 1024: %d/256 wrong; D[1][5]=%g (want %d) D[0][4]=%g (want %d) err=%s\n",off,bad,h[1*16+5],1*64+1,h[4],0*64,cudaGetErrorString(cudaGetLastError()));}
}
